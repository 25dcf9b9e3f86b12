#include "app/engine.h"
#include "app/engine_gpu.h"
#include "app/engine_parts.h"

#include "app/network_setup.h"
#include "app/run_setup.h"
#include "core/node/node.h"
#include "core/store/ledger.h"
#include "core/sync/fetch_size.h"
#include "core/sync/outer_rule.h"
#include "core/train/trainer.h"
#include "p2p/identity.h"
#include "p2p/identity_work.h"
#include "p2p/p2p_swarm.h"
#include "p2p/swarm_session.h"
#include "p2p/torrent_maker.h"

#include <QDir>
#include <QFile>
#include <QSaveFile>

#include <algorithm>
#include <cstdio>
#include <functional>

namespace es::app {
namespace {

constexpr int kInternetJoinWindowMs = 40000;

// The manifest's swarm policy (parsed and bounded by train::parseRunManifest) → the node's.
node::RoundPolicy roundPolicy(const train::SwarmPolicy& s) {
  node::RoundPolicy p;
  p.syncEvery = s.syncEvery;
  p.expertsPerPeer = s.expertsPerPeer;
  p.leaseRounds = s.leaseRounds;
  p.snapshotEvery = s.snapshotEvery;
  p.anchors = {s.anchors.begin(), s.anchors.end()};
  p.deadlineFactor = s.deadlineFactor;
  p.deadlineMinSeconds = s.deadlineMinSeconds;
  p.deadlineMaxSeconds = s.deadlineMaxSeconds;
  return p;
}

void applyMergePolicy(const train::SwarmPolicy& s, node::SpesPeerConfig& peer) {
  peer.codec = s.compression;
  peer.warmupInterval = s.warmupInterval;
  peer.warmupAlpha0 = s.warmupAlpha0;
  peer.warmupDecaySteps = s.warmupDecaySteps;
  peer.warmupTopk = s.warmupTopk;
  peer.aggregate = s.aggregate;
  peer.clipIterations = s.clipIterations;
  peer.clipTauFactor = s.clipTauFactor;
  // The manifest accepted only the names parseOuterOn knows.
  peer.outer = {s.outerLr, s.outerMomentum, sync::parseOuterOn(s.outerOn).value_or(sync::OuterRule::On::Shared)};
}

// The run's merge rule as the start lines state it (docs/ARCHITECTURE.md, "Merge rule").
std::string mergeRuleLine(const train::SwarmPolicy& s) {
  auto number = [](double v) { return QString::number(v).toStdString(); };
  std::string line = "Merge rule: shared tensors by " +
                     (s.aggregate == "mean" ? std::string("the mean")
                                            : "centered clipping (" + std::to_string(s.clipIterations) +
                                                  " iterations, tau " + number(s.clipTauFactor) + " x the median)") +
                     ", experts by their owners' mean";
  if (s.outerLr != 1.0 || s.outerMomentum != 0.0)
    line += "; outer Nesterov step lr " + number(s.outerLr) + ", momentum " + number(s.outerMomentum) + " on " +
            (s.outerOn == "all" ? std::string("all tensors") : "the " + s.outerOn + " tensors");
  if (s.warmupAlpha0 > 0)
    line += "; merging warm-up alpha0 " + number(s.warmupAlpha0) + " every " + std::to_string(s.warmupInterval) +
            " steps until step " + std::to_string(s.warmupDecaySteps);
  return line;
}

QString capsLine(int up, int down) {
  auto rate = [](int bytes) {
    return bytes ? QStringLiteral("%1 KiB/s").arg(bytes / 1024) : QStringLiteral("unlimited");
  };
  return QStringLiteral("Bandwidth caps: upload %1, download %2").arg(rate(up), rate(down));
}

}  // namespace

Engine::Engine(CommandLine commandLine, QString shareDir, QObject* parent)
    : QObject(parent),
      cl_(std::move(commandLine)),
      shareDir_(std::move(shareDir)),
      parts_(std::make_unique<Parts>()),
      viewTimer_(this),
      manifestDeadline_(this) {  // children, so they move to the engine thread with us
  connect(&viewTimer_, &QTimer::timeout, this, [this] {
    if (parts_->node) Q_EMIT swarmChanged(parts_->node->view());
  });
}

// The node first (it stops its trainer thread), the session last (the swarm refers to it).
Engine::~Engine() {
  viewTimer_.stop();
  parts_->node.reset();
  parts_->ledger.reset();
  parts_->swarm.reset();
  parts_->session.reset();
  setInfoSink({});
}

// Setup failures are printed like every setup line (prepareRun's own print themselves).
int Engine::fail(int code, const std::string& error, bool printed) {
  if (!printed) info("expertswarm: " + error);
  Q_EMIT failed(QString::fromStdString(error));
  return code;
}

int Engine::start() {
  // What run setup prints reaches the GUI's log too; its last line is the reason of a failure.
  setInfoSink([this](const std::string& line) {
    lastSetupLine_ = line;
    Q_EMIT message(QString::fromStdString(line));
  });
  // A run named by its magnet link: its manifest comes from its peers first (engine_magnet.cpp).
  if (!cl_.runMagnetHash.isEmpty() && !parts_->session) return fetchManifest();
  return startRun();
}

// Identity and libtorrent session (before the run is known when joining by magnet link).
int Engine::openSession(const QString& dataDir) {
  auto& p = *parts_;
  if (!QDir().mkpath(dataDir)) return fail(1, "cannot create \"" + dataDir.toStdString() + "\"");
  auto identity = p2p::Identity::loadOrCreate((dataDir + QStringLiteral("/identity.key")).toStdString());
  if (!identity) return fail(1, identity.error());
  p.identity = std::make_unique<p2p::Identity>(*identity);
  auto settings = swarmSettingsFor(cl_, dataDir);
  if (!settings) return fail(2, settings.error());
  // Network lines (listen and external addresses, reachability, DHT state): start lines before
  // the node runs, log lines after.
  settings->log = [this](const std::string& line) {
    if (parts_->node)
      Q_EMIT message(QString::fromStdString(line));
    else
      info(line);
  };
  auto session = p2p::SwarmSession::create(*settings, *p.identity);
  if (!session) return fail(2, session.error());
  p.session = std::move(*session);
  auto* s = p.session.get();
  connect(s, &p2p::SwarmSession::networkChanged, this,
          [this, s] { Q_EMIT networkStatus(QString::fromStdString(s->networkSummary())); });
  Q_EMIT networkStatus(QString::fromStdString(s->networkSummary()));
  if (cl_.uploadLimit || cl_.downloadLimit) info(capsLine(cl_.uploadLimit, cl_.downloadLimit).toStdString());
  return 0;
}

// The run asks every key for `bits` of identity work (p2p/identity_work.h): kept beside the key,
// found once (the start line says how long it took).
Expected<p2p::IdentityWork> Engine::identityWork(const QString& dataDir, int bits) {
  static_assert(p2p::kMaxIdentityWorkBits == 30, "the run manifest bounds identity_work_bits by 30");
  auto work = p2p::loadOrSolveIdentityWork((dataDir + QStringLiteral("/identity.work")).toStdString(),
                                           parts_->identity->publicKey(), bits);
  if (work && work->solved)
    info("Identity work: " + std::to_string(work->bits) + " bits (the run asks " + std::to_string(bits) +
         ") found for this key in " + QString::number(work->seconds, 'f', 1).toStdString() +
         " s; kept in identity.work");
  return work;
}

int Engine::startRun() {
  auto& p = *parts_;
  p.prepared = prepareRun(cl_, shareDir_);
  if (p.prepared.exitCode)
    return fail(p.prepared.exitCode, lastSetupLine_.substr(lastSetupLine_.rfind("expertswarm: ", 0) == 0 ? 13 : 0),
                true);
  const auto& data = *p.prepared.data;

  // The run torrent: its manifest, byte-identical everywhere, so the run id is the same on every
  // machine (the data is prepared locally from the bundled corpus).
  const QString runTorrent = p.prepared.runDir + QStringLiteral("/run.torrent");
  auto torrent = p2p::makeTorrent((p.prepared.runDir + QStringLiteral("/run.json")).toStdString());
  if (!torrent) return fail(1, torrent.error());
  QSaveFile torrentFile(runTorrent);
  if (!torrentFile.open(QIODevice::WriteOnly) ||
      torrentFile.write(torrent->bytes.data(), qint64(torrent->bytes.size())) < 0 || !torrentFile.commit())
    return fail(1, "cannot write \"" + runTorrent.toStdString() + "\"");

  if (!p.session)
    if (const int code = openSession(p.prepared.dataDir)) return code;
  auto work = identityWork(p.prepared.dataDir, data.manifest.swarm.identityWorkBits);
  if (!work) return fail(1, work.error());
  if (auto s = p.session->joinRun(runTorrent.toStdString(), p.prepared.runDir.toStdString(),
                                  {data.manifest.swarm.identityWorkBits, work->nonce});
      !s)
    return fail(1, s.error());
  if (!cl_.runMagnetHash.isEmpty() && p.session->runId() != cl_.runMagnetHash.toStdString())
    return fail(1, "the manifest fetched for run " + cl_.runMagnetHash.toStdString() + " is run " + p.session->runId() +
                       " here (was it changed, or made from another corpus?)");
  p.swarm = std::make_unique<p2p::P2pSwarm>(*p.session, *p.identity);

  train::configureTrainingRuntime(cl_.threads);
  auto& config = p.config;
  config.policy = roundPolicy(data.manifest.swarm);
  applyMergePolicy(data.manifest.swarm, config.peer);
  if (cl_.syncEvery) config.policy.syncEvery = cl_.syncEvery;
  if (cl_.claimSize) config.policy.expertsPerPeer = cl_.claimSize;
  // Off one host, discovery takes the DHT's time: a fresh swarm whose peers claimed before they
  // saw each other trains alone and diverges. On the netlab the first records arrive 15-17 s
  // after the start (the DHT's bootstrap waits ~15 s on unreachable nodes, then the rendezvous
  // announces: SwarmSession), and a traversal through unreachable nodes takes ~15 s more: 20 s
  // left a plain-NAT peer alone now and then (seen twice in the netlab runs of 2026-12-03); 40 s
  // allows one more.
  if (!isLoopbackEndpoint(cl_.listen))
    config.policy.joinWindowMs = std::max(config.policy.joinWindowMs, kInternetJoinWindowMs);
  config.nExperts = data.manifest.model.nExperts;
  // Pre-flight: how many experts this machine can train: host memory, or on a GPU its free
  // memory (NVML, loaded at run time); each within the donor's cap for that memory.
  const auto device = train::resolvedDevice(cl_.device.toStdString());
  const auto available = preflightMemory(device, {cl_.hostMemoryCapMiB, cl_.gpuMemoryCapMiB});
  if (available > 0) {
    const auto& m = data.manifest.model;
    const auto budget =
        node::expertBudget(m.totalParameters(), m.expertParameters() * m.nLayers, m.nExperts, available);
    info("Pre-flight: " + std::to_string(available >> 20) + " MiB available; the model needs " +
         std::to_string(budget.fixedBytes >> 20) + " MiB + " + std::to_string(budget.perExpertBytes >> 20) +
         " MiB per trained expert: up to " + std::to_string(budget.experts) + " experts");
    if (budget.experts < 1) return fail(1, "not enough memory to train even one expert of this run");
    config.maxExperts = budget.experts;
  }
  config.readGpu = gpuReader(device);
  config.maxRounds = cl_.rounds;
  auto& peer = config.peer;
  peer.trainer.model = data.manifest.model;
  peer.trainer.train = data.manifest.train;
  peer.trainer.seed = data.manifest.seed;
  // Each peer reads its own stream of batches: the data seed mixes in the peer id.
  peer.trainer.dataSeed = data.manifest.seed ^ std::hash<std::string>{}(p.identity->peerId());
  peer.trainer.device = cl_.device.toStdString();
  if (cl_.evalEvery) peer.trainer.train.evalInterval = cl_.evalEvery;
  peer.runId = p.swarm->runId();
  peer.selfId = p.swarm->selfId().str();
  peer.syncEvery = config.policy.syncEvery;
  peer.stateDir = (p.prepared.runDir + QStringLiteral("/swarm-state")).toStdString();
  peer.tokenizer = std::make_shared<const train::BpeTokenizer>(data.tokenizer);
  peer.testPoison = cl_.testPoison.toStdString();
  if (!cl_.testPoison.isEmpty())
    info("TEST MODE: every contribution of this peer is poisoned (" + peer.testPoison + ")");
  config.contribDir = p.prepared.runDir + QStringLiteral("/contrib");
  config.fetchDir = p.prepared.runDir + QStringLiteral("/incoming");
  config.snapshotDir = p.prepared.runDir + QStringLiteral("/snapshots");
  config.runDir = p.prepared.runDir;
  config.diskQuotaBytes =
      cl_.diskQuotaMiB > 0 ? std::int64_t(cl_.diskQuotaMiB) << 20 : sync::defaultDiskQuotaBytes(data.manifest.model);
  info("Disk quota of the run folder: " + std::to_string(config.diskQuotaBytes >> 20) + " MiB" +
       (cl_.diskQuotaMiB > 0 ? ""
                             : " (from the model: 3 rounds x 32 peers x the largest contribution + 16 x the model)"));
  QDir().mkpath(config.contribDir);

  info("Run \"" + data.manifest.name + "\" (id " + p.swarm->runId() + "), listening on " + p.session->listenEndpoint() +
       ", data dir \"" + p.prepared.dataDir.toStdString() + "\"");
  info("Others join this run with --run magnet:?xt=urn:btmh:1220" + p.swarm->runId());
  info(mergeRuleLine(data.manifest.swarm));
  const auto dbPath = (p.prepared.dataDir + QStringLiteral("/expertswarm.db")).toStdString();
  // Ledger errors arrive on its writer thread: printed there, relayed to this thread's listeners.
  auto ledger =
      store::Ledger::open(dbPath, (shareDir_ + QStringLiteral("/sql")).toStdString(), [this](const std::string& error) {
        std::fprintf(stderr, "expertswarm: ledger: %s\n", error.c_str());
        QMetaObject::invokeMethod(
            this, [this, e = QString::fromStdString(error)] { Q_EMIT message(QStringLiteral("Ledger: ") + e); },
            Qt::QueuedConnection);
      });
  if (!ledger) return fail(1, ledger.error());
  p.ledger = std::move(*ledger);
  config.runName = data.manifest.name;
  p.node = std::make_unique<node::Node>(*p.swarm, config, data.train, data.val, p.ledger.get());
  wireNode();

  node::RunInfo runInfo;
  runInfo.runName = data.manifest.name;
  runInfo.runId = p.swarm->runId();
  runInfo.selfId = p.swarm->selfId().str();
  runInfo.ledgerPath = dbPath;
  runInfo.listen = p.session->listenEndpoint();
  runInfo.device = cl_.device.toStdString();
  runInfo.nExperts = data.manifest.model.nExperts;
  runInfo.nLayers = data.manifest.model.nLayers;
  runInfo.syncEvery = config.policy.syncEvery;
  runInfo.aggregate = data.manifest.swarm.aggregate;
  runInfo.outerLr = data.manifest.swarm.outerLr;
  runInfo.outerMomentum = data.manifest.swarm.outerMomentum;
  runInfo.outerOn = data.manifest.swarm.outerOn;
  setInfoSink({});  // from here on the node's messages are the log
  Q_EMIT started(runInfo);
  p.node->start();
  viewTimer_.start(1000);
  return 0;
}

void Engine::wireNode() {
  auto* node = parts_->node.get();
  connect(node, &node::Node::message, this, &Engine::message);
  connect(node, &node::Node::noted, this, &Engine::noted);
  connect(node, &node::Node::stepped, this, &Engine::stepped);
  connect(node, &node::Node::roundClosed, this, [this](const node::RoundSummary& s) {
    Q_EMIT roundClosed(s);
    Q_EMIT swarmChanged(parts_->node->view());
  });
  connect(node, &node::Node::roundRepaired, this, &Engine::roundRepaired);
  connect(node, &node::Node::pausedChanged, this, &Engine::pausedChanged);
  connect(node, &node::Node::failed, this, [this](const QString& error) {
    Q_EMIT failed(error);
    parts_->node->stop();
  });
  connect(node, &node::Node::finished, this, [this] {
    viewTimer_.stop();  // the last view stays the one of the last round (not the empty leaving one)
    if (!cl_.exportPath.isEmpty()) {
      if (auto s = parts_->node->exportModel(cl_.exportPath); !s)
        Q_EMIT failed(QStringLiteral("--export: ") + QString::fromStdString(s.error()));
      else
        Q_EMIT message(QStringLiteral("Exported the merged model to \"%1\"").arg(cl_.exportPath));
    }
    Q_EMIT finished();
  });
}

void Engine::stop() {
  if (parts_->node)
    parts_->node->stop();
  else
    Q_EMIT finished();
}

void Engine::setPaused(bool paused) {
  if (parts_->node) parts_->node->setPaused(paused);
}

void Engine::finishRoundThenPause() {
  if (parts_->node) parts_->node->finishRoundThenPause();
}

// Before start() the caps are only kept (start() applies and logs them with the session).
void Engine::setRateLimits(int uploadBytesPerSecond, int downloadBytesPerSecond) {
  cl_.uploadLimit = uploadBytesPerSecond;
  cl_.downloadLimit = downloadBytesPerSecond;
  if (!parts_->session) return;
  parts_->session->setRateLimits(uploadBytesPerSecond, downloadBytesPerSecond);
  Q_EMIT message(capsLine(uploadBytesPerSecond, downloadBytesPerSecond));
}

EngineSummary Engine::summary() const {
  EngineSummary s;
  if (!parts_->node) return s;
  s.rounds = parts_->node->roundsClosed();
  s.trainerBusyFraction = parts_->node->trainerBusyFraction();
  s.meanRoundSeconds = parts_->node->meanRoundSeconds();
  const auto c = parts_->session->counters();
  const double rounds = std::max<double>(1, double(s.rounds));
  s.bytesSentPerRound = double(c.bytesSent) / rounds;
  s.bytesReceivedPerRound = double(c.bytesReceived) / rounds;
  const auto transfers = parts_->session->transfers();
  s.transfers = static_cast<int>(transfers.size());
  for (const auto& t : transfers)
    s.transferFiles << QStringLiteral("%1 (%2)").arg(
        QString::fromStdString(t.path), t.finished ? QStringLiteral("complete") : QStringLiteral("partial"));
  s.refusedFetches = c.refusedFetches;
  return s;
}

Status Engine::exportModel(const QString& path) {
  if (!parts_->node) return makeError("the engine has not started");
  return parts_->node->exportModel(path);
}

}  // namespace es::app
