// Node: the trainer thread (created once the claims are known) and what it reports — steps, the
// resumed state, a trained round, a merge, an adopted snapshot, a repair, durable state.
#include "core/node/node.h"
#include "core/node/node_util.h"

#include <QDateTime>

namespace es::node {

using detail::q;

void Node::startTrainer() {
  auto peerConfig = config_.peer;
  peerConfig.trainer.localExperts = own_.claims;
  worker_ = new TrainerWorker(peerConfig, train_, val_, config_.contribDir, config_.snapshotDir,
                              config_.policy.snapshotEvery);
  worker_->moveToThread(&trainerThread_);
  connect(worker_, &TrainerWorker::ready, this, &Node::onReady);
  connect(worker_, &TrainerWorker::failed, this, [this](const QString& e) { Q_EMIT failed(e); });
  connect(worker_, &TrainerWorker::stepped, this, &Node::onStepped);
  connect(worker_, &TrainerWorker::roundTrained, this, &Node::onRoundTrained);
  connect(worker_, &TrainerWorker::merged, this, &Node::onMerged);
  connect(worker_, &TrainerWorker::snapshotAdopted, this,
          [this](qint64 round, const QString& fingerprint, const QString& error, bool contentAtFault) {
            agreement_.snapshotAdopted(round, fingerprint.toStdString(), error, contentAtFault);
          });
  connect(worker_, &TrainerWorker::remerged, this, &Node::onRemerged);
  connect(worker_, &TrainerWorker::shardsReduced, this, &Node::onShardsReduced);
  connect(worker_, &TrainerWorker::shardsRefused, this, &Node::onShardsRefused);
  connect(worker_, &TrainerWorker::shardsNameRefused, this, &Node::onShardsNameRefused);
  connect(worker_, &TrainerWorker::snapshotWritten, this, &Node::publishSnapshot);
  connect(worker_, &TrainerWorker::persisted, this, [this](qint64 round, const QString& error) {
    if (!error.isEmpty())
      Q_EMIT message(QStringLiteral("Saving the state of round %1 failed: %2").arg(round).arg(error));
    recorder_.persisted(round, error.isEmpty());
  });
  connect(worker_, &TrainerWorker::pausedChanged, this, [this](bool paused) {
    paused_ = paused;
    Q_EMIT message(paused ? QStringLiteral("Training paused") : QStringLiteral("Training resumed"));
    Q_EMIT pausedChanged(paused);
  });
  if (paused_ || pauseAfterRound_)  // asked before the trainer existed
    QMetaObject::invokeMethod(
        worker_, [w = worker_, now = paused_] { now ? w->setPaused(true) : w->pauseAfterRound(); },
        Qt::QueuedConnection);
  // Issue 38: each merge derives the next round's topology (sync/round_topology.h): all-to-all for
  // a sparse codec, sharded from the run's shard_from when it names one, else where the byte model
  // says sharding pays (15 senders with merged work for the bundled model, int8, R = 3).
  QMetaObject::invokeMethod(
      worker_, [w = worker_] { w->allowShardedRounds(true); }, Qt::QueuedConnection);
  trainerThread_.start();
  QMetaObject::invokeMethod(
      worker_, [w = worker_] { w->start(); }, Qt::QueuedConnection);
}

void Node::onStepped(StepReport r) {
  own_.steps = r.step;
  trainerSteps_.stepped(r, config_.readGpu, kGpuReadingMs);
  if (ledger_) {
    ledger_->addMetric(swarm_.runId(), {r.step, own_.round, r.loss, std::nullopt, r.lr, r.tokensPerSecond,
                                        QDateTime::currentMSecsSinceEpoch(), gpuMetricOf(r.gpu)});
  }
  Q_EMIT stepped(r);
}

void Node::onReady(qint64 mergedRound, qint64 step, bool resumed, const QString& baseFingerprint,
                   const QString& resumeNote) {
  if (!resumeNote.isEmpty()) Q_EMIT message(QStringLiteral("Saved state: ") + resumeNote);
  own_.round = mergedRound + 1;
  own_.mergedRound = mergedRound;
  own_.steps = step;
  if (resumed) {
    Q_EMIT message(QStringLiteral("Resumed after round %1 (step %2)").arg(mergedRound).arg(step));
    QVariantMap fields{{"round", mergedRound}, {"step", step}};
    if (!resumeNote.isEmpty()) fields.insert("note", resumeNote);
    Q_EMIT noted(QStringLiteral("resumed"), fields);
  }
  if (resumed && ledger_ && mergedRound > 0)  // durable state, maybe not yet committed when we died
    ledger_->ensureRound(swarm_.runId(), {mergedRound, QDateTime::currentMSecsSinceEpoch(), 0, 0, 0,
                                          baseFingerprint.toStdString(), config_.peer.stateDir});
  announce();
}

void Node::onRoundTrained(const RoundTrained& trained) {
  // Out of step with the swarm: this contribution is built on a base nobody else holds. Hold the
  // trainer at the boundary until the snapshot lands (it then starts the next round afresh).
  if (agreement_.outOfStep()) {
    agreement_.tryResync();
    if (agreement_.outOfStep()) return void(held_ = trained);  // published if we give up waiting (resumeHeldRound)
  }
  own_.loss = trained.meanLoss;
  own_.tokensPerSecond = trained.tokensPerSecond;
  publishContribution(trained);  // node_publish.cpp: hashed off this thread, then startGathering
}

}  // namespace es::node
