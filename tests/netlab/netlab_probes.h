// Test helper: swarm_probe peers (the swarm layer alone, tests/support/swarm_probe.cpp) on the
// emulated internet of scripts/netlab, joined to a run torrent made from the bundled run.json,
// with the lab's own DHT node as the only bootstrap. Shared by the netlab tests that need no
// training (tst_netlab_relink, tst_netlab_same_port).
#pragma once

#include "netlab/netlab.h"
#include "p2p/torrent_maker.h"
#include "support/swarm_probes.h"

#include <QTemporaryDir>

namespace es::test {

class NetlabProbes {
 public:
  // Writes run.json and run.torrent into `dir`; an error message, or empty.
  QString prepare(const QTemporaryDir& dir) {
    dir_ = dir.path();
    QFile::copy(QStringLiteral(ES_SHARE_DIR "/runs/sotu-text/run.json"), path("run.json"));
    auto torrent = es::p2p::makeTorrent(path("run.json").toStdString());
    if (!torrent) return QString::fromStdString(torrent.error());
    runTorrent_ = path("run.torrent");
    QFile file(runTorrent_);
    if (!file.open(QIODevice::WriteOnly)) return "cannot write " + runTorrent_;
    file.write(torrent->bytes.data(), qint64(torrent->bytes.size()));
    return {};
  }

  // The lab's DHT node, at NetLab::kBootstrap.
  std::unique_ptr<Probe> bootstrap(const NetLab& lab) const {
    return std::make_unique<Probe>("boot",
                                   QStringList{"--listen", NetLab::kBootstrap, "--key", path("boot.key"), "--internet"},
                                   QStringList{"ip", "netns", "exec", lab.netns("boot")});
  }

  // A run peer on `host`, listening on 0.0.0.0:`port`.
  std::unique_ptr<Probe> peer(const NetLab& lab, const QString& host, int port) const {
    QDir().mkpath(path(host + "/run"));
    QFile::copy(path("run.json"), path(host + "/run/run.json"));
    return std::make_unique<Probe>(
        host,
        QStringList{"--listen", QString("0.0.0.0:%1").arg(port), "--bootstrap", NetLab::kBootstrap, "--key",
                    path(host + ".key"), "--internet", "--run", runTorrent_, "--run-dir", path(host + "/run")},
        QStringList{"ip", "netns", "exec", lab.netns(host)});
  }

  static QJsonObject ready(const Probe& p) {
    return p.find([](const QJsonObject& e) { return isEvent(e, "ready"); });
  }
  // Its status and every log line, for a failure.
  static void dump(Probe& p) {
    qInfo().noquote() << p.name() << QJsonDocument(ask(p, "status", "status")).toJson(QJsonDocument::Compact);
    for (const auto& e : p.events())
      if (isEvent(e, "log")) qInfo().noquote() << p.name() << e.value("t").toInteger() << e.value("line").toString();
  }

  QString path(const QString& name) const { return QDir(dir_).filePath(name); }

 private:
  QString dir_;
  QString runTorrent_;
};

}  // namespace es::test

// The initTestCase of a probe test: skipped where the lab cannot be built (not root, a tool
// missing), else the run torrent written into `dir` (a QTemporaryDir) for `probes`.
#define ES_NETLAB_PROBES_INIT(probes, dir)                                      \
  do {                                                                          \
    if (const auto why = es::test::NetLab::unavailableReason(); !why.isEmpty()) \
      QSKIP(qPrintable("the emulated internet cannot be built here: " + why));  \
    QVERIFY((dir).isValid());                                                   \
    const QString problem = (probes).prepare(dir);                              \
    QVERIFY2(problem.isEmpty(), qPrintable(problem));                           \
  } while (false)
