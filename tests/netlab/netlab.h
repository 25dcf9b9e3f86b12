// Test and bench helper: the emulated internet of scripts/netlab (namespaces, NAT routers, shaped
// links) brought up for one test and removed after it, and clients started inside its hosts.
// Every address is a documentation-range address inside namespaces this helper created.
#pragma once

#include "support/swarm_clients.h"

#include <QCoreApplication>
#include <QProcess>
#include <QStringList>

#include <unistd.h>

#include <vector>

namespace es::test {

struct LabHost {
  QString name;     // e.g. "pub1", "map2", "natp1", "boot"
  QString address;  // its own address (behind a NAT: the LAN one)
  QString site;     // "public", "mapped-nat", "plain-nat", "bootstrap"
};

class NetLab {
 public:
  static constexpr auto kBootstrap = "203.0.113.10:6881";

  // Why the lab cannot be made here (not root, no namespaces, a tool missing), or empty.
  static QString unavailableReason() {
    QProcess check;
    check.start(script(), {QStringLiteral("check")});
    check.waitForFinished(30000);
    if (check.exitStatus() == QProcess::NormalExit && check.exitCode() == 0) return {};
    const QString out = QString::fromUtf8(check.readAllStandardOutput() + check.readAllStandardError()).trimmed();
    return out.isEmpty() ? QStringLiteral("scripts/netlab check failed") : out;
  }

  // A lab of its own (namespaces prefixed per process, so two labs never meet).
  explicit NetLab(int perSite, const QProcessEnvironment& shaping = {}) {
    env_ = QProcessEnvironment::systemEnvironment();
    for (const auto& key : shaping.keys()) env_.insert(key, shaping.value(key));
    env_.insert(QStringLiteral("NETLAB_PREFIX"), prefix());
    ok_ = runScript({QStringLiteral("up"), QString::number(perSite)}, &log_);
    QString hosts;
    if (ok_) runScript({QStringLiteral("hosts")}, &hosts);
    for (const auto& line : hosts.split('\n', Qt::SkipEmptyParts)) {
      const auto f = line.split(' ');
      if (f.size() == 3) hosts_.push_back({f[0], f[1], f[2]});
    }
  }
  ~NetLab() { runScript({QStringLiteral("down")}, nullptr); }
  NetLab(const NetLab&) = delete;
  NetLab& operator=(const NetLab&) = delete;

  bool ok() const { return ok_; }
  const QString& log() const { return log_; }
  const std::vector<LabHost>& hosts() const { return hosts_; }
  std::vector<LabHost> peers() const {
    std::vector<LabHost> out;
    for (const auto& h : hosts_)
      if (h.site != QLatin1String("bootstrap")) out.push_back(h);
    return out;
  }
  QString netns(const QString& host) const { return prefix() + '-' + host; }

  // A program inside `host`'s namespace (`ip netns exec` execs it: the process is the program).
  std::unique_ptr<SwarmClient> start(const QString& name, const QString& host, const QString& program,
                                     const QStringList& args, const QProcessEnvironment& env = {}) const {
    QProcessEnvironment e = env.isEmpty() ? QProcessEnvironment::systemEnvironment() : env;
    return std::make_unique<SwarmClient>(name, QStringLiteral("ip"),
                                         QStringList{"netns", "exec", netns(host), program} + args, e);
  }

  bool cut(const QString& router) const { return runScript({QStringLiteral("cut"), router}, nullptr); }
  bool restore(const QString& router) const { return runScript({QStringLiteral("restore"), router}, nullptr); }
  // Byte counters of a host's uplink interface (what it sent, what it received).
  std::pair<qint64, qint64> linkBytes(const QString& host) const {
    QProcess p;
    p.start(QStringLiteral("ip"), {"netns", "exec", netns(host), "cat", "/sys/class/net/eth0/statistics/tx_bytes",
                                   "/sys/class/net/eth0/statistics/rx_bytes"});
    p.waitForFinished(10000);
    const auto lines = QString::fromUtf8(p.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts);
    return lines.size() == 2 ? std::pair<qint64, qint64>{lines[0].toLongLong(), lines[1].toLongLong()}
                             : std::pair<qint64, qint64>{-1, -1};
  }

 private:
  static QString script() { return QStringLiteral(ES_TEST_SOURCE_DIR "/../scripts/netlab"); }
  static QString prefix() { return QStringLiteral("esl%1").arg(::getpid()); }

  bool runScript(const QStringList& args, QString* out) const {
    QProcess p;
    p.setProcessEnvironment(env_);
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(script(), args);
    const bool finished = p.waitForFinished(120000);
    if (out) *out = QString::fromUtf8(p.readAll());
    return finished && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
  }

  QProcessEnvironment env_;
  bool ok_ = false;
  QString log_;
  std::vector<LabHost> hosts_;
};

}  // namespace es::test
