// Test helper: real `expertswarm --no-gui` processes forming a swarm on 127.0.0.1. Collects
// their progress lines (stdout) and log lines (stderr); waits are conditions with deadlines.
#pragma once

#include "support/wait_until.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QtTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <optional>

namespace es::test {

// A port that was free on 127.0.0.1 for both TCP and UDP a moment ago (for a first peer whose
// address the others need before it starts).
inline int freeLoopbackPort() {
  for (int attempt = 0; attempt < 20; ++attempt) {
    const int tcp = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    int port = 0;
    if (::bind(tcp, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::getsockname(tcp, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
      port = ntohs(addr.sin_port);
    const int udp = ::socket(AF_INET, SOCK_DGRAM, 0);
    const bool udpFree = port && ::bind(udp, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(tcp);
    ::close(udp);
    if (udpFree) return port;
  }
  return 0;
}

// The headless client as the swarm tests run it: peer `i` of a loopback swarm whose peer 0
// listens on `bootstrap` and is every other peer's bootstrap node; rounds of `syncEvery` steps,
// each evaluated; one thread each (the tests share two cores).
inline QStringList swarmPeerArgs(const QString& run, const QString& dataDir, int i, const QString& bootstrap,
                                 int syncEvery, int rounds) {
  QStringList a{"--no-gui",
                "--run",
                run,
                "--data-dir",
                dataDir,
                "--listen",
                i == 0 ? bootstrap : QStringLiteral("127.0.0.1:0"),
                "--sync-every",
                QString::number(syncEvery),
                "--eval-every",
                QString::number(syncEvery),
                "--rounds",
                QString::number(rounds),
                "--threads",
                "1",
                "--events"};
  if (i > 0) a << "--bootstrap" << bootstrap;
  return a;
}

// The identity work customRun asks (below); probes joining such a run must ask the same: a peer
// asking more refuses the others' records and cuts their connections as garbage senders.
constexpr int kCustomRunWorkBits = 12;

// A copy of the bundled run with some of its "swarm" policy changed (the corpus is linked), and
// lighter steps: these tests check the protocol, which the model's size decides (every file and
// fetch keeps its size), not the batch. Batches of 4 sequences and 2 validation batches: the
// clients' training was what kept the 2 cores busy (99 % during tst_swarm_churn), each round's
// validation a third of it. `lightSteps` false keeps the bundled run's steps (tst_swarm_fetch: its
// session's torrent bound was broken once, 8 of 6, in a clean CI run with light steps).
inline QString customRun(const QString& dir, const QJsonObject& swarmChanges, bool lightSteps = true) {
  QFile source(QStringLiteral(ES_SHARE_DIR "/runs/sotu-text/run.json"));
  if (!source.open(QIODevice::ReadOnly) || !QDir().mkpath(dir)) return {};
  auto manifest = QJsonDocument::fromJson(source.readAll()).object();
  auto swarm = manifest.value("swarm").toObject();
  // 12 bits of identity work (a few ms) unless the test asks otherwise: the bundled run's 22 take
  // each client 0.2–5 s at start (a geometric draw, longer under load), which spread the peers'
  // joins past each other's join windows (tst_swarm_newcomer under load: a starter claimed all 8
  // experts, alone). The bundled run's cost is exercised where it is used as is (tst_swarm_magnet,
  // tst_gui_swarm, tst_netlab_swarm) and by tst_swarm_adversary, which asks it explicitly.
  swarm.insert("identity_work_bits", kCustomRunWorkBits);
  for (auto it = swarmChanges.begin(); it != swarmChanges.end(); ++it) swarm.insert(it.key(), it.value());
  manifest.insert("swarm", swarm);
  if (lightSteps) {
    auto train = manifest.value("train").toObject();
    train.insert("batch_size", 4);
    train.insert("eval_batches", 2);
    manifest.insert("train", train);
  }
  QFile out(dir + "/run.json");
  if (!out.open(QIODevice::WriteOnly)) return {};
  out.write(QJsonDocument(manifest).toJson());
  QFile::link(QStringLiteral(ES_SHARE_DIR "/runs/sotu-text/corpus"), dir + "/corpus");
  return dir;
}

struct RoundLine {
  int peers = 0;
  double loss = 0, tokensPerSecond = 0;
  std::optional<double> valLoss;  // only on rounds that evaluated the merged state
  QString merged;
};

class SwarmClient {
 public:
  SwarmClient(const QString& name, const QStringList& args) : name_(name), args_(args) { start(); }
  // Another program in front of the client (e.g. xvfb-run for the desktop window), with extra
  // environment variables.
  SwarmClient(const QString& name, const QString& program, const QStringList& args, const QProcessEnvironment& env)
      : name_(name), args_(args), program_(program), env_(env) {
    start();
  }
  ~SwarmClient() { kill(); }

  void start() {
    process_ = std::make_unique<QProcess>();
    process_->setProcessChannelMode(QProcess::SeparateChannels);
    QObject::connect(process_.get(), &QProcess::readyReadStandardOutput, [this] { read(false); });
    QObject::connect(process_.get(), &QProcess::readyReadStandardError, [this] { read(true); });
    if (!env_.isEmpty()) process_->setProcessEnvironment(env_);
    process_->start(program_, args_);
  }
  void kill() {
    if (process_ && process_->state() != QProcess::NotRunning) {
      process_->kill();
      process_->waitForFinished(10000);
    }
  }
  void terminate() {
    if (process_) process_->terminate();
  }
  qint64 pid() const { return process_ ? process_->processId() : 0; }
  // What a client that does not stop is doing: every thread's stack (gdb, where installed) or
  // else each thread's state and kernel wait channel from /proc.
  QString threads() const {
    const qint64 id = pid();
    if (!id || !running()) return QStringLiteral("(not running)");
    QProcess gdb;
    gdb.start(QStringLiteral("gdb"), {"-p", QString::number(id), "-batch", "-ex", "thread apply all bt 25"});
    if (gdb.waitForFinished(60000) && gdb.exitCode() == 0) {
      QStringList frames;
      for (const auto& line : QString::fromUtf8(gdb.readAllStandardOutput()).split('\n'))
        if (line.startsWith("Thread ") || line.startsWith('#')) frames << line;
      if (!frames.isEmpty()) return frames.join('\n');
    }
    QStringList states;
    for (const auto& task : QDir(QString("/proc/%1/task").arg(id)).entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
      auto read = [&](const QString& f) {
        QFile file(QString("/proc/%1/task/%2/%3").arg(id).arg(task, f));
        return file.open(QIODevice::ReadOnly) ? QString::fromUtf8(file.readAll()).trimmed() : QString();
      };
      states
          << QString("%1 %2 wchan=%3 stat=%4").arg(task, read("comm"), read("wchan"), read("stat").section(' ', 2, 2));
    }
    return states.join('\n');
  }
  bool finishedWith(int code) const {
    return process_ && process_->state() == QProcess::NotRunning && process_->exitStatus() == QProcess::NormalExit &&
           process_->exitCode() == code;
  }
  bool running() const { return process_ && process_->state() != QProcess::NotRunning; }
  // "running", "exit code N" or "crashed" (a signal): for failure messages.
  QString exitState() const {
    if (!process_ || running()) return QStringLiteral("running");
    return process_->exitStatus() == QProcess::CrashExit ? QStringLiteral("crashed")
                                                         : QStringLiteral("exit code %1").arg(process_->exitCode());
  }

  const std::map<int, RoundLine>& rounds() const { return rounds_; }
  const QStringList& log() const { return log_; }
  // The log with the wall-clock time each line arrived (hh:mm:ss.zzz), for failure dumps: a
  // swarm's timeline across clients (when a round closed here, when a record arrived there).
  // Round lines included.
  const QStringList& timedLog() const { return timeline_; }
  static QString stamp() { return QTime::currentTime().toString(QStringLiteral("hh:mm:ss.zzz ")); }
  const QString& name() const { return name_; }
  // "127.0.0.1:PORT": the started event's (`--events`), else from the "listening on" line, once printed.
  QString endpoint() const {
    if (started_.contains("listen")) return started_.value("listen").toString();
    static const QRegularExpression re(QStringLiteral("listening on (\\S+),"));
    for (const auto& line : log_)
      if (auto m = re.match(line); m.hasMatch()) return m.captured(1);
    return {};
  }
  // From the started event (clients run with `--events`); empty before it.
  QString runId() const { return started_.value("run").toString(); }
  QString peerId() const { return started_.value("peer").toString(); }
  // The summary event printed at exit (`--events`); empty before it.
  const QJsonObject& summary() const { return summary_; }
  // Every event of `kind` so far, in order (`--events`; app/event_lines.h).
  std::vector<QJsonObject> events(const QString& kind) const {
    std::vector<QJsonObject> out;
    for (const auto& e : events_)
      if (e.value("event").toString() == kind) out.push_back(e);
    return out;
  }
  bool logContains(const QString& text) const {
    for (const auto& line : log_)
      if (line.contains(text)) return true;
    return false;
  }

 private:
  void read(bool err) {
    auto& buffer = err ? errBuffer_ : outBuffer_;
    buffer += err ? process_->readAllStandardError() : process_->readAllStandardOutput();
    for (int end = buffer.indexOf('\n'); end >= 0; end = buffer.indexOf('\n')) {
      const QString line = QString::fromUtf8(buffer.left(end));
      buffer.remove(0, end + 1);
      if (err) {
        log_ << line;
        timeline_ << stamp() + line;
        continue;
      }
      if (line.startsWith('{')) {
        readEvent(line);
        continue;
      }
      static const QRegularExpression re(
          QStringLiteral("^round=(\\d+) peers=(\\d+) loss=([0-9.]+)( val_loss=([0-9.]+))? tok/s=(\\d+) "
                         "merged=([0-9a-f]+)( repaired)?$"));
      if (auto m = re.match(line); m.hasMatch()) {
        RoundLine r{m.captured(2).toInt(), m.captured(3).toDouble(), m.captured(6).toDouble(), std::nullopt,
                    m.captured(7)};
        if (!m.captured(5).isEmpty()) r.valLoss = m.captured(5).toDouble();
        rounds_[m.captured(1).toInt()] = r;
        timeline_ << stamp() + line;
      } else {
        qWarning().noquote() << name_ << "unexpected output:" << line;
      }
    }
  }

  // One line of `--events` (app/event_lines.h): a round as the progress line would say it, the
  // start and the summary kept whole; anything else that is not an event is reported.
  void readEvent(const QString& line) {
    QJsonParseError error{};
    const auto event = QJsonDocument::fromJson(line.toUtf8(), &error).object();
    const auto kind = event.value("event").toString();
    if (error.error != QJsonParseError::NoError || kind.isEmpty())
      return void(qWarning().noquote() << name_ << "unexpected output:" << line);
    events_.push_back(event);
    timeline_ << stamp() + line;
    if (kind == QLatin1String("round")) {
      RoundLine r{event.value("peers").toInt(), event.value("loss").toDouble(), event.value("tok_s").toDouble(),
                  std::nullopt, event.value("merged").toString()};
      if (event.contains("val_loss")) r.valLoss = event.value("val_loss").toDouble();
      rounds_[event.value("round").toInt()] = r;
    } else if (kind == QLatin1String("started")) {
      started_ = event;
    } else if (kind == QLatin1String("summary")) {
      summary_ = event;
    }
  }

  QString name_;
  QStringList args_;
  QString program_ = QStringLiteral(ES_CLIENT_BINARY);
  QProcessEnvironment env_;
  std::unique_ptr<QProcess> process_;
  QByteArray outBuffer_, errBuffer_;
  std::map<int, RoundLine> rounds_;
  QStringList log_;
  QStringList timeline_;  // every line (log and round lines), with its time of arrival
  QJsonObject started_, summary_;
  std::vector<QJsonObject> events_;
};

}  // namespace es::test
