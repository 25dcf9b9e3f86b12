// Engine: starting a run once its folder is known (from --run, or fetched by magnet link): the run
// torrent, joining the swarm, the node's configuration, the ledger and the node itself.
#include "app/engine.h"
#include "app/engine_gpu.h"
#include "app/engine_parts.h"
#include "core/train/prepared_run.h"

#include "app/run_setup.h"
#include "core/node/node.h"
#include "core/store/ledger.h"
#include "core/sync/fetch_size.h"
#include "core/sync/outer_rule.h"
#include "core/train/trainer.h"
#include "p2p/identity.h"
#include "p2p/p2p_swarm.h"
#include "p2p/swarm_session.h"
#include "p2p/torrent_maker.h"

#include <QDir>
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
  peer.codec = s.contributionCodec();
  peer.feedbackDecay = s.feedbackDecay;
  peer.warmupInterval = s.warmupInterval;
  peer.warmupAlpha0 = s.warmupAlpha0;
  peer.warmupDecaySteps = s.warmupDecaySteps;
  peer.warmupTopk = s.warmupTopk;
  peer.aggregate = s.aggregate;
  peer.clipIterations = s.clipIterations;
  peer.clipTauFactor = s.clipTauFactor;
  // The manifest accepted only the names parseOuterOn knows.
  peer.outer = {s.outerLr, s.outerMomentum, sync::parseOuterOn(s.outerOn).value_or(sync::OuterRule::On::Shared)};
  peer.reduction = {s.reductionReplicas, s.reductionAudits, s.shardFrom};
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

// The run torrent (run_setup.h: run.json alone, or a prepared run's whole folder), as prepareRun
// made it: its v2 info-hash is the run id on every machine.
Status writeRunTorrent(const p2p::TorrentFile& torrent, const QString& runTorrent) {
  QSaveFile torrentFile(runTorrent);
  if (!torrentFile.open(QIODevice::WriteOnly) ||
      torrentFile.write(torrent.bytes.data(), qint64(torrent.bytes.size())) < 0 || !torrentFile.commit())
    return makeError("cannot write \"" + runTorrent.toStdString() + "\"");
  return {};
}

}  // namespace

int Engine::startRun() {
  auto& p = *parts_;
  p.prepared = prepareRun(cl_, shareDir_);
  if (p.prepared.exitCode)
    return fail(p.prepared.exitCode, lastSetupLine_.substr(lastSetupLine_.rfind("expertswarm: ", 0) == 0 ? 13 : 0),
                true);
  QString runTorrent = p.prepared.runState;  // a prepared run held in part: its fetch state
  if (runTorrent.isEmpty()) {
    runTorrent = p.prepared.runDir + QStringLiteral("/run.torrent");
    if (auto s = writeRunTorrent(p.prepared.runTorrent, runTorrent); !s) return fail(1, s.error());
  }
  if (const int code = joinSwarm(runTorrent)) return code;
  if (const int code = configureNode()) return code;
  announceRun();
  const auto dbPath = (p.prepared.dataDir + QStringLiteral("/expertswarm.db")).toStdString();
  if (const int code = openLedger(dbPath)) return code;
  const auto& data = *p.prepared.data;
  p.config.runName = data.manifest.name;
  p.node = std::make_unique<node::Node>(*p.swarm, p.config, data.train, data.val, p.ledger.get());
  wireNode();
  startShardRotation();
  const node::RunInfo runInfo = describeRun(dbPath);
  setInfoSink({});  // from here on the node's messages are the log
  Q_EMIT started(runInfo);
  p.node->start();
  viewTimer_.start(1000);
  return 0;
}

// A prepared run held in part moves on through its shards as it trains (app/shard_rotation.h).
void Engine::startShardRotation() {
  auto& p = *parts_;
  const auto& m = p.prepared.data->manifest;
  if (p.prepared.runState.isEmpty() || !m.data.prepared()) return;
  ShardRotationSetup setup;
  setup.folder = p.prepared.sourceDir;
  setup.peerId = p.identity->peerId();
  setup.runId = p.session->runId();
  setup.shardTokens = m.data.preparedTrainTokens;
  setup.budgetBytes = cl_.dataBudgetBytes;
  setup.tokensPerStep = std::int64_t(m.train.batchSize) * m.model.seqLen;
  setup.vocabSize = m.model.vocabSize;
  const auto held = train::presentShards(m, p.prepared.sourceDir.toStdString());
  p.rotation = std::make_unique<ShardRotation>(std::move(setup), held, *p.session, *p.node);
  connect(p.rotation.get(), &ShardRotation::noted, this, &Engine::noted);
  connect(p.rotation.get(), &ShardRotation::message, this, &Engine::message);
  connect(p.node.get(), &node::Node::stepped, p.rotation.get(),
          [r = p.rotation.get()](const node::StepReport& report) { r->onStep(report.step); });
}

// A session already open was opened to fetch the manifest (engine_magnet.cpp).
int Engine::joinSwarm(const QString& runTorrent) {
  auto& p = *parts_;
  const int workBits = p.prepared.data->manifest.swarm.identityWorkBits;
  if (!p.session)
    if (const int code = openSession(p.prepared.dataDir)) return code;
  auto work = identityWork(p.prepared.dataDir, workBits);
  if (!work) return fail(1, work.error());
  if (auto s = p.session->joinRun(runTorrent.toStdString(), p.prepared.seedDir.toStdString(), {workBits, work->nonce});
      !s)
    return fail(1, s.error());
  if (!cl_.runMagnetHash.isEmpty() && p.session->runId() != cl_.runMagnetHash.toStdString())
    return fail(1, "the manifest fetched for run " + cl_.runMagnetHash.toStdString() + " is run " + p.session->runId() +
                       " here (was it changed, or made from another corpus?)");
  p.swarm = std::make_unique<p2p::P2pSwarm>(*p.session, *p.identity);
  return 0;
}

// The manifest's policies, overridden by the command line where it gives one.
int Engine::configureNode() {
  const auto& data = *parts_->prepared.data;
  auto& config = parts_->config;
  train::configureTrainingRuntime(cl_.threads);
  config.policy = roundPolicy(data.manifest.swarm);
  applyMergePolicy(data.manifest.swarm, config.peer);
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
  const auto device = train::resolvedDevice(cl_.device.toStdString());
  if (const int code = sizeClaimByMemory(device)) return code;
  config.readGpu = gpuReader(device);
  config.maxRounds = cl_.rounds;
  configurePeer();
  configureRunFolders();
  return 0;
}

// Pre-flight: how many experts this machine can train: host memory, or on a GPU its free
// memory (NVML, loaded at run time); each within the donor's cap for that memory.
int Engine::sizeClaimByMemory(const std::string& device) {
  const auto available = preflightMemory(device, {cl_.hostMemoryCapMiB, cl_.gpuMemoryCapMiB});
  if (available <= 0) return 0;  // unknown (and uncapped): memory does not bound the claim
  const auto& m = parts_->prepared.data->manifest.model;
  const auto budget = node::expertBudget(m.totalParameters(), m.expertParameters() * m.nLayers, m.nExperts, available);
  info("Pre-flight: " + std::to_string(available >> 20) + " MiB available; the model needs " +
       std::to_string(budget.fixedBytes >> 20) + " MiB + " + std::to_string(budget.perExpertBytes >> 20) +
       " MiB per trained expert: up to " + std::to_string(budget.experts) + " experts");
  if (budget.experts < 1) return fail(1, "not enough memory to train even one expert of this run");
  parts_->config.maxExperts = budget.experts;
  return 0;
}

void Engine::configurePeer() {
  auto& p = *parts_;
  const auto& data = *p.prepared.data;
  auto& peer = p.config.peer;
  peer.trainer.model = data.manifest.model;
  peer.trainer.train = data.manifest.train;
  peer.trainer.seed = data.manifest.seed;
  // Each peer reads its own stream of batches: the data seed mixes in the peer id.
  peer.trainer.dataSeed = data.manifest.seed ^ std::hash<std::string>{}(p.identity->peerId());
  peer.trainer.device = cl_.device.toStdString();
  if (cl_.evalEvery) peer.trainer.train.evalInterval = cl_.evalEvery;
  peer.runId = p.swarm->runId();
  peer.selfId = p.swarm->selfId().str();
  peer.syncEvery = cl_.syncEvery ? cl_.syncEvery : data.manifest.swarm.syncEvery;
  peer.stateDir = (p.prepared.runDir + QStringLiteral("/swarm-state")).toStdString();
  peer.tokenizer = std::make_shared<const train::BpeTokenizer>(data.tokenizer);
  peer.testPoison = cl_.testPoison.toStdString();
  if (!cl_.testPoison.isEmpty())
    info("TEST MODE: every contribution of this peer is poisoned (" + peer.testPoison + ")");
}

void Engine::configureRunFolders() {
  const auto& runDir = parts_->prepared.runDir;
  auto& config = parts_->config;
  config.contribDir = runDir + QStringLiteral("/contrib");
  config.fetchDir = runDir + QStringLiteral("/incoming");
  config.snapshotDir = runDir + QStringLiteral("/snapshots");
  config.runDir = runDir;
  config.diskQuotaBytes = cl_.diskQuotaMiB > 0 ? std::int64_t(cl_.diskQuotaMiB) << 20
                                               : sync::defaultDiskQuotaBytes(parts_->prepared.data->manifest.model);
  info("Disk quota of the run folder: " + std::to_string(config.diskQuotaBytes >> 20) + " MiB" +
       (cl_.diskQuotaMiB > 0 ? ""
                             : " (from the model: 3 rounds x 32 peers x the largest contribution + 16 x the model)"));
  QDir().mkpath(config.contribDir);
}

void Engine::announceRun() const {
  const auto& p = *parts_;
  const auto& data = *p.prepared.data;
  info("Run \"" + data.manifest.name + "\" (id " + p.swarm->runId() + "), listening on " + p.session->listenEndpoint() +
       ", data dir \"" + p.prepared.dataDir.toStdString() + "\"");
  info("Others join this run with --run magnet:?xt=urn:btmh:1220" + p.swarm->runId());
  info(mergeRuleLine(data.manifest.swarm));
}

int Engine::openLedger(const std::string& dbPath) {
  // Ledger errors arrive on its writer thread: printed there, relayed to this thread's listeners.
  auto ledger =
      store::Ledger::open(dbPath, (shareDir_ + QStringLiteral("/sql")).toStdString(), [this](const std::string& error) {
        std::fprintf(stderr, "expertswarm: ledger: %s\n", error.c_str());
        QMetaObject::invokeMethod(
            this, [this, e = QString::fromStdString(error)] { Q_EMIT message(QStringLiteral("Ledger: ") + e); },
            Qt::QueuedConnection);
      });
  if (!ledger) return fail(1, ledger.error());
  parts_->ledger = std::move(*ledger);
  return 0;
}

node::RunInfo Engine::describeRun(const std::string& ledgerPath) const {
  const auto& p = *parts_;
  const auto& data = *p.prepared.data;
  node::RunInfo runInfo;
  runInfo.runName = data.manifest.name;
  runInfo.runId = p.swarm->runId();
  runInfo.selfId = p.swarm->selfId().str();
  runInfo.ledgerPath = ledgerPath;
  runInfo.listen = p.session->listenEndpoint();
  runInfo.device = cl_.device.toStdString();
  runInfo.nExperts = data.manifest.model.nExperts;
  runInfo.nLayers = data.manifest.model.nLayers;
  runInfo.syncEvery = p.config.peer.syncEvery;
  runInfo.aggregate = data.manifest.swarm.aggregate;
  runInfo.outerLr = data.manifest.swarm.outerLr;
  runInfo.outerMomentum = data.manifest.swarm.outerMomentum;
  runInfo.outerOn = data.manifest.swarm.outerOn;
  return runInfo;
}

}  // namespace es::app
