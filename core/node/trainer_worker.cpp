#include "core/node/trainer_worker.h"

#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QTimer>

#include <algorithm>

namespace es::node {

TrainerWorker::TrainerWorker(SpesPeerConfig config, std::shared_ptr<const std::vector<std::uint16_t>> train,
                             std::shared_ptr<const std::vector<std::uint16_t>> val, QString contribDir,
                             QString snapshotDir, int snapshotEvery)
    : config_(std::move(config)),
      train_(std::move(train)),
      val_(std::move(val)),
      contribDir_(std::move(contribDir)),
      snapshotDir_(std::move(snapshotDir)),
      snapshotEvery_(snapshotEvery) {}

TrainerWorker::~TrainerWorker() = default;

void TrainerWorker::start() {
  auto peer = SpesPeer::create(config_, train_, val_);
  if (!peer) return Q_EMIT failed(QString::fromStdString(peer.error()));
  peer_ = std::move(*peer);
  deriveTopology();  // resumed from a saved state: the round after it
  peer_->setPersistedCallback([this](std::int64_t round, std::string error) {  // on the writer thread
    {
      std::lock_guard lock(persistMutex_);
      persistReports_.emplace_back(round, QString::fromStdString(error));
    }
    QMetaObject::invokeMethod(this, &TrainerWorker::reportPersisted, Qt::QueuedConnection);
  });
  Q_EMIT ready(peer_->mergedRound(), peer_->stepCount(), peer_->resumed(),
               QString::fromStdString(peer_->baseSharedFingerprint()), QString::fromStdString(peer_->resumeNote()));
  // Resumed mid-round: the state is the one saved right after a merge, so the current round's
  // contribution is still ahead of us.
  ticking_ = true;
  QTimer::singleShot(0, this, &TrainerWorker::tick);
}

void TrainerWorker::tick() {
  ticking_ = false;
  if (stopping_ || !peer_ || paused_) return;  // setPaused(false) restarts us
  if (contributionDue_) {
    if (awaitingMerge_ != 0) return;  // merge() restarts us
    writeContribution();
    if (!peer_) return;
    if (pauseAfterRound_) {
      pauseAfterRound_ = false;
      return setPaused(true);
    }
  }
  const auto stats = peer_->step();
  roundLoss_ += stats.loss;
  roundSeconds_ += stats.seconds;
  roundTokens_ += stats.tokens;
  ++roundSteps_;
  Q_EMIT stepped({stats.step, stats.seconds, stats.loss, stats.lr,
                  stats.seconds > 0 ? double(stats.tokens) / stats.seconds : 0.0});
  if (stats.step % config_.syncEvery == 0) contributionDue_ = true;
  ticking_ = true;
  QTimer::singleShot(0, this, &TrainerWorker::tick);
}

// The time in the name keeps every published file unique: after a resync, a repair or a restart
// the same round is written again, and a file that still seeds (or sits in someone's download
// folder under that name) must never be overwritten with other bytes.
QString TrainerWorker::contributionPath(qint64 round) const {
  return QStringLiteral("%1/round-%2-%3-%4.safetensors")
      .arg(contribDir_)
      .arg(round)
      .arg(QString::fromStdString(config_.selfId).left(16))
      .arg(QDateTime::currentMSecsSinceEpoch());
}

bool TrainerWorker::shardedRound(qint64 round) const {
  return shardedRounds_ && nextTopology_ && nextTopology_->sharded && round == peer_->mergedRound() + 1;
}

void TrainerWorker::writeContribution() {
  const qint64 round = peer_->stepCount() / config_.syncEvery;
  QString path = contributionPath(round);
  Expected<ContributionWritten> written = makeError("not written");
  if (shardedRound(round)) {
    path.chop(QStringLiteral(".safetensors").size());  // a folder: one file per shard, the figures
    QDir().mkpath(path);
    written = peer_->writeShardedContribution(round, path.toStdString(), nextTopology_->shardElements);
  } else {
    written = peer_->writeContribution(round, path.toStdString());
  }
  contributionDue_ = false;
  if (!written) {
    peer_.reset();
    return Q_EMIT failed(QString::fromStdString(written.error()));
  }
  RoundTrained out;
  out.round = round;
  out.contribution = *written;
  if (shardedRound(round)) out.topology = nextTopology_;
  out.meanLoss = roundSteps_ ? roundLoss_ / double(roundSteps_) : 0.0;
  out.tokensPerSecond = roundSeconds_ > 0 ? double(roundTokens_) / roundSeconds_ : 0.0;
  out.seconds = roundSeconds_;
  roundLoss_ = roundSeconds_ = 0;
  roundTokens_ = roundSteps_ = 0;
  awaitingMerge_ = round;
  lastTrained_ = out;
  Q_EMIT roundTrained(out);
}

void TrainerWorker::merge(qint64 round, const std::vector<IncomingContribution>& contributions,
                          const std::vector<int>& claims) {
  if (!peer_ || round != awaitingMerge_) return;
  const bool evaluate = SpesPeer::isEvalRound(round, config_.syncEvery, config_.trainer.train.evalInterval);
  auto result = peer_->merge(round, contributions, evaluate);
  if (!result) {
    peer_.reset();
    return Q_EMIT failed(QString::fromStdString(result.error()));
  }
  finishMerge(round, std::move(*result), claims);
}

void TrainerWorker::finishMerge(qint64 round, MergeResult result, const std::vector<int>& claims) {
  awaitingMerge_ = 0;
  if (!claims.empty() && claims != peer_->localExperts()) {
    if (auto s = peer_->setLocalExperts(claims); !s) {
      peer_.reset();
      return Q_EMIT failed(QString::fromStdString("changing the claimed experts: " + s.error()));
    }
  }
  RoundMerged out;
  out.result = std::move(result);
  out.step = peer_->stepCount();
  deriveTopology();
  out.nextTopology = nextTopology_;
  // Validation costs about a twentieth of a 50-step round here: only at the run's eval interval
  // (and the first round), on the merged state (SpesPeer::merge), nothing in between.
  if (snapshotEvery_ > 0 && round % snapshotEvery_ == 0) {
    auto path = peer_->writeSnapshot(snapshotDir_.toStdString());
    if (path) out.snapshotPath = QString::fromStdString(*path);  // a failed snapshot only costs newcomers
  }
  Q_EMIT merged(out);
  if (!ticking_ && !stopping_) {
    ticking_ = true;
    QTimer::singleShot(0, this, &TrainerWorker::tick);
  }
}

void TrainerWorker::adoptSnapshot(const QString& path, qint64 expectedRound, int skipSteps) {
  if (!peer_) return;
  // A fetched file we cannot open is this disk's problem, never its announcers' lie (at afd6a98 a
  // newcomer's snapshot was gone when read, and it banned the five honest peers that announced it).
  if (!QFileInfo(path).isReadable())
    return Q_EMIT snapshotAdopted(0, {}, QStringLiteral("cannot read \"%1\"").arg(path), false);
  auto round = peer_->adoptSnapshot(path.toStdString(), expectedRound, skipSteps);
  if (!round) return Q_EMIT snapshotAdopted(0, {}, QString::fromStdString(round.error()), true);
  awaitingMerge_ = 0;
  contributionDue_ = false;
  deriveTopology();
  roundLoss_ = roundSeconds_ = 0;
  roundTokens_ = roundSteps_ = 0;
  Q_EMIT snapshotAdopted(*round, QString::fromStdString(peer_->baseFingerprint()), {}, false);
  if (!ticking_ && !stopping_) {
    ticking_ = true;
    QTimer::singleShot(0, this, &TrainerWorker::tick);
  }
}

void TrainerWorker::remerge(qint64 round, const std::vector<IncomingContribution>& contributions,
                            const QString& fingerprint) {
  if (!peer_) return;
  const qint64 pending = awaitingMerge_ == round + 1 ? round + 1 : 0;
  auto done = peer_->remerge(round, contributions, fingerprint.toStdString(), contributionPath(pending).toStdString());
  if (!done) return Q_EMIT remerged(round, {}, {}, 0, QString::fromStdString(done.error()));
  deriveTopology();  // a round already written again (below) keeps the topology it was written with
  Q_EMIT remerged(round, QString::fromStdString(done->fingerprint), QString::fromStdString(done->sharedFingerprint),
                  done->accepted, {});
  if (done->rewritten.round > 0) {
    lastTrained_.contribution = done->rewritten;
    Q_EMIT roundTrained(lastTrained_);
  }
}

void TrainerWorker::allowShardedRounds(bool allowed) {
  shardedRounds_ = allowed;
  deriveTopology();
}

// The next round's topology from the state held now — after a merge, and as much after a resume,
// a snapshot or a repair: every peer derives it from the same agreed state, so one that took the
// swarm's state another way must not keep what it derived from its own (a peer that took round
// 2's snapshot wrote a sharded folder for round 3, which the others, all-to-all, refused and
// banned it for: tst_node_sharded aShardThatCannotBeRecomputedEndsInTheSwarmsSnapshot).
void TrainerWorker::deriveTopology() {
  if (!peer_ || !shardedRounds_) return nextTopology_.reset();
  nextTopology_ = std::make_shared<const sync::RoundTopology>(peer_->nextTopology({}, config_.reduction));
}

void TrainerWorker::reduceShards(qint64 round, const ShardedRoundSpec& spec, const std::vector<std::string>& shards,
                                 const QString& outputDir) {
  if (!peer_ || round != awaitingMerge_) return;
  auto reduced = peer_->reduceShards(spec, shards, outputDir.toStdString());
  if (!reduced) return Q_EMIT shardsReduced(round, {}, QString::fromStdString(reduced.error()));
  Q_EMIT shardsReduced(round, *reduced, {});
}

// A round's merged shards that cannot be applied (one moves a weight past the ceiling, a file is
// unreadable) change nothing: the node decides what next, the trainer keeps waiting for a merge.
void TrainerWorker::applyShards(qint64 round, const ShardedRoundSpec& spec, const std::vector<std::string>& mergedPaths,
                                const std::vector<int>& claims) {
  if (!peer_ || round != awaitingMerge_) return;
  const bool evaluate = SpesPeer::isEvalRound(round, config_.syncEvery, config_.trainer.train.evalInterval);
  ShardRefusals refusals;
  auto result = peer_->applyShards(spec, mergedPaths, evaluate, &refusals);
  if (!result && !refusals.empty()) return Q_EMIT shardsNameRefused(round, refusals);
  if (!result) return Q_EMIT shardsRefused(round, QString::fromStdString(result.error()));
  finishMerge(round, std::move(*result), claims);
}

void TrainerWorker::writeSnapshotNow() {
  if (!peer_ || peer_->mergedRound() <= 0) return;
  auto path = peer_->writeSnapshot(snapshotDir_.toStdString());
  if (path) Q_EMIT snapshotWritten(peer_->mergedRound(), QString::fromStdString(*path));
}

void TrainerWorker::setTrainTokens(std::shared_ptr<const std::vector<std::uint16_t>> tokens) {
  if (!peer_) return;
  if (auto s = peer_->setTrainTokens(std::move(tokens)); !s) Q_EMIT failed(QString::fromStdString(s.error()));
}

void TrainerWorker::setPaused(bool paused) {
  if (paused == paused_) return;
  paused_ = paused;
  if (!paused) pauseAfterRound_ = false;
  Q_EMIT pausedChanged(paused_);
  if (!paused_ && !ticking_ && !stopping_ && peer_) {
    ticking_ = true;
    QTimer::singleShot(0, this, &TrainerWorker::tick);
  }
}

void TrainerWorker::pauseAfterRound() {
  if (!paused_) pauseAfterRound_ = true;
}

void TrainerWorker::stop() {
  stopping_ = true;
  if (peer_) peer_->waitForWrites();
  // Now, not from the queued call: the node emits `finished` once stop() returns, and the
  // ledger must have recorded the last round by then (tst_node_rounds lost it under CI load).
  reportPersisted();
  Q_EMIT stopped();
}

void TrainerWorker::reportPersisted() {
  std::vector<std::pair<qint64, QString>> reports;
  {
    std::lock_guard lock(persistMutex_);
    reports.swap(persistReports_);
  }
  for (const auto& [round, error] : reports) Q_EMIT persisted(round, error);
}

Status TrainerWorker::exportTo(const QString& path) {
  if (!peer_) return makeError("the trainer is not running");
  return peer_->exportWeights(path.toStdString());
}

}  // namespace es::node
