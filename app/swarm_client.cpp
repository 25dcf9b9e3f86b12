#include "app/swarm_client.h"

#include "app/run_setup.h"
#include "core/node/node.h"
#include "core/store/ledger.h"
#include "p2p/identity.h"
#include "p2p/p2p_swarm.h"
#include "p2p/swarm_session.h"
#include "p2p/torrent_maker.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>
#include <QTimer>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <unistd.h>
#include <cstdio>
#include <functional>

namespace es::app {
namespace {

std::atomic<bool> g_stop{false};
void requestStop(int) { g_stop.store(true); }

// run.json's "swarm" object → the node's policy (absent keys keep their defaults).
node::RoundPolicy parsePolicy(const std::string& json, QString& codec, node::SpesPeerConfig& peer) {
  const auto swarm = QJsonDocument::fromJson(QByteArray::fromStdString(json)).object();
  node::RoundPolicy p;
  p.syncEvery = swarm.value("sync_every").toInt(p.syncEvery);
  p.expertsPerPeer = swarm.value("experts_per_peer").toInt(p.expertsPerPeer);
  p.leaseRounds = swarm.value("lease_rounds").toInt(p.leaseRounds);
  p.snapshotEvery = swarm.value("snapshot_every").toInt(p.snapshotEvery);
  const auto deadline = swarm.value("deadline").toObject();
  p.deadlineFactor = deadline.value("factor").toDouble(p.deadlineFactor);
  p.deadlineMinSeconds = deadline.value("min_seconds").toDouble(p.deadlineMinSeconds);
  p.deadlineMaxSeconds = deadline.value("max_seconds").toDouble(p.deadlineMaxSeconds);
  codec = swarm.value("compression").toString(QStringLiteral("int8"));
  const auto warmup = swarm.value("merge_warmup").toObject();
  peer.warmupInterval = warmup.value("interval").toInt(50);
  peer.warmupAlpha0 = warmup.value("alpha0").toDouble(0.0);
  peer.warmupDecaySteps = warmup.value("decay_steps").toInt(1000);
  peer.warmupTopk = warmup.value("topk").toInt(4);
  return p;
}

// MemAvailable from /proc/meminfo (bytes), or -1 when unknown.
std::int64_t availableMemory() {
  QFile meminfo(QStringLiteral("/proc/meminfo"));
  if (!meminfo.open(QIODevice::ReadOnly)) return -1;
  for (const auto& line : meminfo.readAll().split('\n'))
    if (line.startsWith("MemAvailable:")) return line.simplified().split(' ').value(1).toLongLong() * 1024;
  return -1;
}

bool isLoopback(const QString& endpoint) {
  return endpoint.startsWith(QLatin1String("127.")) || endpoint.startsWith(QLatin1String("[::1]")) ||
         endpoint.startsWith(QLatin1String("localhost:"));
}

}  // namespace

int runSwarmClient(const CommandLine& cl, const QString& shareDir) {
  auto prepared = prepareRun(cl, shareDir);
  if (prepared.exitCode) return prepared.exitCode;
  const auto& data = *prepared.data;
  auto identity = p2p::Identity::loadOrCreate((prepared.dataDir + QStringLiteral("/identity.key")).toStdString());
  if (!identity) return info("expertswarm: " + identity.error()), 1;

  // The run torrent: its manifest, byte-identical everywhere, so the run id is the same on every
  // machine (the data is prepared locally from the bundled corpus).
  const QString runTorrent = prepared.runDir + QStringLiteral("/run.torrent");
  auto torrent = p2p::makeTorrent((prepared.runDir + QStringLiteral("/run.json")).toStdString());
  if (!torrent) return info("expertswarm: " + torrent.error()), 1;
  QSaveFile torrentFile(runTorrent);
  if (!torrentFile.open(QIODevice::WriteOnly) || torrentFile.write(torrent->bytes.data(), qint64(torrent->bytes.size())) < 0 ||
      !torrentFile.commit())
    return info("expertswarm: cannot write \"" + runTorrent.toStdString() + "\""), 1;

  p2p::SwarmSettings settings;
  settings.listen = cl.listen.toStdString();
  for (const auto& node : cl.bootstrap) settings.bootstrap.push_back(node.toStdString());
  settings.sameHostSwarm = isLoopback(cl.listen);  // peers on one machine (tests, the two-peer demo)
  settings.enableUtp = !settings.sameHostSwarm;
  auto session = p2p::SwarmSession::create(settings, *identity);
  if (!session) return info("expertswarm: " + session.error()), 2;
  if (auto s = (*session)->joinRun(runTorrent.toStdString(), prepared.runDir.toStdString()); !s)
    return info("expertswarm: " + s.error()), 1;
  p2p::P2pSwarm swarm(**session, *identity);

  train::configureTrainingRuntime(cl.threads);
  node::NodeConfig config;
  QString codec;
  config.policy = parsePolicy(data.manifest.swarmJson, codec, config.peer);
  if (cl.syncEvery) config.policy.syncEvery = cl.syncEvery;
  config.nExperts = data.manifest.model.nExperts;
  // Pre-flight: how many experts this machine can train (CPU memory; a GPU's is not probed yet).
  if (const auto available = availableMemory(); available > 0) {
    const auto& m = data.manifest.model;
    const auto budget = node::expertBudget(m.totalParameters(), m.expertParameters() * m.nLayers, m.nExperts, available);
    info("Pre-flight: " + std::to_string(available >> 20) + " MiB available; the model needs " +
         std::to_string(budget.fixedBytes >> 20) + " MiB + " + std::to_string(budget.perExpertBytes >> 20) +
         " MiB per trained expert: up to " + std::to_string(budget.experts) + " experts");
    if (budget.experts < 1) return info("expertswarm: not enough memory to train even one expert of this run"), 1;
    config.maxExperts = budget.experts;
  }
  config.maxRounds = cl.rounds;
  auto& peer = config.peer;
  peer.trainer.model = data.manifest.model;
  peer.trainer.train = data.manifest.train;
  peer.trainer.seed = data.manifest.seed;
  // Each peer reads its own stream of batches: the data seed mixes in the peer id.
  peer.trainer.dataSeed = data.manifest.seed ^ std::hash<std::string>{}(identity->peerId());
  peer.trainer.device = cl.device.toStdString();
  if (cl.evalEvery) peer.trainer.train.evalInterval = cl.evalEvery;
  peer.runId = swarm.runId();
  peer.selfId = swarm.selfId();
  peer.codec = codec.toStdString();
  peer.syncEvery = config.policy.syncEvery;
  peer.stateDir = (prepared.runDir + QStringLiteral("/swarm-state")).toStdString();
  peer.testPoison = cl.testPoison.toStdString();
  if (!cl.testPoison.isEmpty()) info("TEST MODE: every contribution of this peer is poisoned (" + peer.testPoison + ")");
  config.contribDir = prepared.runDir + QStringLiteral("/contrib");
  config.fetchDir = prepared.runDir + QStringLiteral("/incoming");
  config.snapshotDir = prepared.runDir + QStringLiteral("/snapshots");
  QDir().mkpath(config.contribDir);

  info("Run \"" + data.manifest.name + "\" (id " + swarm.runId() + "), listening on " +
       (*session)->listenEndpoint() + ", data dir \"" + prepared.dataDir.toStdString() + "\"");
  const auto dbPath = (prepared.dataDir + QStringLiteral("/expertswarm.db")).toStdString();
  auto ledger = store::Ledger::open(dbPath, (shareDir + QStringLiteral("/sql")).toStdString(),
                                    [](const std::string& error) { info("expertswarm: ledger: " + error); });
  if (!ledger) return info("expertswarm: " + ledger.error()), 1;
  config.runName = data.manifest.name;
  node::Node node(swarm, config, data.train, data.val, ledger->get());
  int exitCode = 0;
  // On a terminal, a live bar on stderr (overwritten in place) between the log and progress lines.
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  auto clearBar = [tty] {
    if (tty) std::fprintf(stderr, "\r\033[K");
  };
  QObject::connect(&node, &node::Node::message, [clearBar](const QString& line) {
    clearBar();
    info(line.toStdString());
  });
  QMetaObject::Connection bar;
  if (tty)
    bar = QObject::connect(&node, &node::Node::stepped, [&config](const node::StepReport& r) {
      const int h = config.policy.syncEvery, inRound = int((r.step - 1) % h) + 1;
      const int filled = inRound * 20 / h;
      std::fprintf(stderr, "\r\033[K[%s%s] round %lld step %d/%d loss %.3f %.0f tok/s", std::string(filled, '#').c_str(),
                   std::string(20 - filled, '.').c_str(), static_cast<long long>((r.step - 1) / h + 1), inRound, h, r.loss,
                   r.tokensPerSecond);
    });
  QObject::connect(&node, &node::Node::roundClosed, [clearBar](const node::RoundSummary& s) {
    clearBar();
    // merged=: fingerprint of the merged shared tensors, equal on every peer that merged the same set.
    std::printf("round=%lld peers=%d loss=%.4f val_loss=%.4f tok/s=%.0f merged=%s\n", static_cast<long long>(s.round), s.peers,
                s.loss, s.valLoss, s.tokensPerSecond, s.merge.sharedFingerprint.c_str());
    std::fflush(stdout);
  });
  QObject::connect(&node, &node::Node::failed, [&](const QString& error) {
    info("expertswarm: " + error.toStdString());
    exitCode = 1;
    node.stop();
  });
  QObject::connect(&node, &node::Node::finished, [&] {
    QObject::disconnect(bar);
    clearBar();
    const auto c = (*session)->counters();
    const double rounds = std::max<double>(1, double(node.roundsClosed()));
    std::fprintf(stderr, "Summary: rounds=%lld trainer_busy_fraction=%.4f mean_round_seconds=%.2f bytes_sent_per_round=%.0f bytes_received_per_round=%.0f\n",
                 static_cast<long long>(node.roundsClosed()), node.trainerBusyFraction(), node.meanRoundSeconds(),
                 double(c.bytesSent) / rounds, double(c.bytesReceived) / rounds);
    if (!cl.exportPath.isEmpty()) {
      if (auto s = node.exportModel(cl.exportPath); !s) {
        info("expertswarm: --export: " + s.error());
        exitCode = 1;
      } else {
        info("Exported the merged model to \"" + cl.exportPath.toStdString() + "\"");
      }
    }
    // Let the leaving record go out before the session closes.
    QTimer::singleShot(300, QCoreApplication::instance(), &QCoreApplication::quit);
  });

  struct sigaction action {};
  action.sa_handler = requestStop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  QTimer stopPoll;
  QObject::connect(&stopPoll, &QTimer::timeout, [&] {
    if (g_stop.exchange(false)) {
      info("Stopping: finishing the step, keeping the last merged state, leaving the swarm");
      node.stop();
    }
  });
  stopPoll.start(100);
  node.start();
  QCoreApplication::exec();
  return exitCode;
}

}  // namespace es::app
