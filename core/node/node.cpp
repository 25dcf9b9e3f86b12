#include "core/node/node.h"
#include "core/node/node_util.h"
#include "core/node/rules/peer_rules.h"

#include <QDateTime>

#include <algorithm>

namespace es::node {

using detail::q;

Node::Node(Swarm& swarm, NodeConfig config, std::shared_ptr<const std::vector<std::uint16_t>> train,
           std::shared_ptr<const std::vector<std::uint16_t>> val, store::Ledger* ledger, QObject* parent)
    : QObject(parent),
      swarm_(swarm),
      config_(std::move(config)),
      ledger_(ledger),
      train_(std::move(train)),
      val_(std::move(val)) {
  deadline_.setSingleShot(true);
  joinWindow_.setSingleShot(true);
  connect(&deadline_, &QTimer::timeout, this, [this] {
    // A contribution that is on its way is waited for (up to the maximum): closing without it
    // would make us merge a different set than the peers that received it. On its way = bytes
    // arrived since the last look; a stalled transfer (its peer cut off) must not hold the round
    // for the maximum (seen on the netlab: 10 minutes after a 60 s partition).
    // Cut off (we heard from fewer than half of the others all gather long): merging what we hold
    // alone only makes a state nobody else has (the netlab's 200 s cut: each cut peer merged two
    // rounds alone and needed a snapshot after); we wait, up to the maximum, and once the link is
    // back the round closes on the set the others merged (closeOnSwarmSet).
    if (gather_ && gather_->clock.elapsed() < config_.policy.deadlineMaxSeconds * 1000 &&
        (fetchesProgressing() || cutOff())) {
      deadline_.start(static_cast<int>(config_.policy.deadlineMinSeconds * 1000 / 2));
      return;
    }
    closeRound(true);
  });
  connect(&joinWindow_, &QTimer::timeout, this, [this] { decideClaims(); });
  resyncWatchdog_.setSingleShot(true);
  connect(&resyncWatchdog_, &QTimer::timeout, this, [this] { onResyncWatchdog(); });
}

Node::~Node() {
  if (worker_) {
    QMetaObject::invokeMethod(
        worker_, [w = worker_] { w->stop(); }, Qt::BlockingQueuedConnection);
    worker_->deleteLater();
  }
  trainerThread_.quit();
  trainerThread_.wait();
}

void Node::start() {
  if (ledger_) ledger_->joinRun(swarm_.runId(), config_.runName);
  cleanRunFolder(true);
  loadBans();
  SwarmEvents events;
  events.peersChanged = [this] {
    noteRoundClaims();
    noteHeard();
    if (ledger_) {  // only what changed, at most once a minute per peer (core/node/rules/peer_sightings.h)
      const auto now = QDateTime::currentMSecsSinceEpoch();
      sightings_.begin();
      for (const auto& p : swarm_.peers())
        if (sightings_.due(p.id, p.seq, now)) ledger_->seePeer(swarm_.runId(), p.id.str(), p.publicKey, now);
      sightings_.end();
    }
    checkAgreement();
    if (resyncWanted_ && pendingSnapshot_.empty()) tryResync();
    gather();
  };
  events.fetched = [this](const ContentId& id, const std::string& path) {
    if (!pendingSnapshot_.empty() && id == pendingSnapshot_) {
      Q_EMIT message(QStringLiteral("Snapshot fetched; adopting it"));
      QMetaObject::invokeMethod(
          worker_, [w = worker_, p = q(path), r = pendingSnapshotRound_] { w->adoptSnapshot(p, r); },
          Qt::QueuedConnection);
      return;
    }
    if (repair_ && repair_->missing.count(id)) return onRepairFetched(id, path);
    onContributionFetched(id, path);
  };
  events.fetchFailed = [this](const ContentId& id, const std::string& reason, bool refused) {
    onFetchFailed(id, reason, refused);
  };
  events.peerBanned = [this](const PeerId& id, const std::string& reason) {
    ban(id, reason);
    Q_EMIT message(QStringLiteral("Peer %1 banned: %2").arg(q(id).left(16), q(reason)));
  };
  swarm_.setEvents(std::move(events));
  noteRoundClaims();  // the records already here
  announce();         // present ourselves (no claims yet) so others count us before they claim
  Q_EMIT message(QStringLiteral("Joined run %1 as peer %2; listening for peers for %3 s")
                     .arg(q(swarm_.runId()).left(16), q(swarm_.selfId()).left(16))
                     .arg(config_.policy.joinWindowMs / 1000.0));
  joinWindow_.start(config_.policy.joinWindowMs);
}

// The trainer thread, training our claims (created once the claims are known).
void Node::startTrainer() {
  auto peerConfig = config_.peer;
  peerConfig.trainer.localExperts = claims_;
  worker_ = new TrainerWorker(peerConfig, train_, val_, config_.contribDir, config_.snapshotDir,
                              config_.policy.snapshotEvery);
  worker_->moveToThread(&trainerThread_);
  connect(worker_, &TrainerWorker::ready, this, &Node::onReady);
  connect(worker_, &TrainerWorker::failed, this, [this](const QString& e) { Q_EMIT failed(e); });
  connect(worker_, &TrainerWorker::stepped, this, &Node::onStepped);
  connect(worker_, &TrainerWorker::roundTrained, this, &Node::onRoundTrained);
  connect(worker_, &TrainerWorker::merged, this, &Node::onMerged);
  connect(worker_, &TrainerWorker::snapshotAdopted, this, &Node::onSnapshotAdopted);
  connect(worker_, &TrainerWorker::remerged, this, &Node::onRemerged);
  connect(worker_, &TrainerWorker::snapshotWritten, this, &Node::publishSnapshot);
  connect(worker_, &TrainerWorker::persisted, this, &Node::onPersisted);
  connect(worker_, &TrainerWorker::pausedChanged, this, [this](bool paused) {
    paused_ = paused;
    Q_EMIT message(paused ? QStringLiteral("Training paused") : QStringLiteral("Training resumed"));
    Q_EMIT pausedChanged(paused);
  });
  if (paused_ || pauseAfterRound_)  // asked before the trainer existed
    QMetaObject::invokeMethod(
        worker_, [w = worker_, now = paused_] { now ? w->setPaused(true) : w->pauseAfterRound(); },
        Qt::QueuedConnection);
  trainerThread_.start();
  QMetaObject::invokeMethod(
      worker_, [w = worker_] { w->start(); }, Qt::QueuedConnection);
}

void Node::onStepped(StepReport r) {
  steps_ = r.step;
  if (!sinceFirstStep_.isValid()) {
    sinceFirstStep_.start();
    firstStepSeconds_ = r.seconds;
  }
  stepSeconds_ += r.seconds;
  if (config_.readGpu && (!sinceGpuReading_.isValid() || sinceGpuReading_.elapsed() >= kGpuReadingMs)) {
    r.gpu = config_.readGpu();
    sinceGpuReading_.start();
  }
  lastStep_ = r;
  if (ledger_) {
    ledger_->addMetric(swarm_.runId(), {r.step, round_, r.loss, std::nullopt, r.lr, r.tokensPerSecond,
                                        QDateTime::currentMSecsSinceEpoch(), gpuMetricOf(r.gpu)});
  }
  Q_EMIT stepped(r);
}

void Node::onReady(qint64 mergedRound, qint64 step, bool resumed, const QString& baseFingerprint,
                   const QString& resumeNote) {
  if (!resumeNote.isEmpty()) Q_EMIT message(QStringLiteral("Saved state: ") + resumeNote);
  round_ = mergedRound + 1;
  mergedRound_ = mergedRound;
  steps_ = step;
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

void Node::announce() {
  Announcement a;
  a.round = round_;
  a.claims = stopping_ ? std::vector<int>{} : claims_;
  a.leaseUntil = stopping_ || claims_.empty() ? 0 : round_ + config_.policy.leaseRounds;
  for (auto it = contrib_.rbegin(); it != contrib_.rend() && a.contrib.size() < 3; ++it) a.contrib.insert(*it);
  for (auto it = snapshots_.rbegin(); it != snapshots_.rend() && a.snapshot.size() < 2; ++it) a.snapshot.insert(*it);
  a.merged.insert(fingerprints_.begin(), fingerprints_.end());
  for (const auto& [round, digest] : setDigests_)
    if (fingerprints_.count(round)) a.sets[round] = digest;  // a snapshot's set is not known
  a.steps = steps_;
  a.loss = lastLoss_;
  a.tokensPerSecond = lastTokensPerSecond_;
  if (auto s = swarm_.announce(a); !s) Q_EMIT message(QStringLiteral("Announce failed: %1").arg(q(s.error())));
}

std::vector<SwarmPeer> Node::livePeers(qint64 round, bool withNoShows) const {
  auto live = livePeersOf(swarm_.peers(), round, config_.policy.leaseRounds, banned_,
                          QDateTime::currentMSecsSinceEpoch(), claimingSince_);
  if (!withNoShows)
    live.erase(std::remove_if(live.begin(), live.end(),
                              [this, round](const SwarmPeer& p) {
                                const auto noShow = noShows_.find(p.id);
                                const auto lifted = noShowLifted_.find(p.id);
                                const bool onProbation = lifted != noShowLifted_.end() && lifted->second == round;
                                return (noShow != noShows_.end() && noShow->second >= kNoShowRounds) ||
                                       (staleOut(p.id) && !onProbation);
                              }),
               live.end());
  return live;
}

void Node::onRoundTrained(const RoundTrained& trained) {
  // Out of step with the swarm: this contribution is built on a base nobody else holds. Hold the
  // trainer at the boundary until the snapshot lands (it then starts the next round afresh).
  if (resyncWanted_) {
    tryResync();
    if (resyncWanted_) return void(held_ = trained);  // published if we give up waiting (giveUpResync)
  }
  lastLoss_ = trained.meanLoss;
  lastTokensPerSecond_ = trained.tokensPerSecond;
  publishContribution(trained);  // node_publish.cpp: hashed off this thread, then startGathering
}

void Node::closeRound(bool deadline, const std::set<ContentId>* only) {
  if (!gather_ || gather_->closing) return;
  gather_->closing = true;
  deadline_.stop();
  const double seconds = gather_->clock.elapsed() / 1000.0;
  if (sinceRoundClosed_.isValid()) allRoundSeconds_.push_back(sinceRoundClosed_.elapsed() / 1000.0);
  if (sinceRoundClosed_.isValid() && !deadline) roundSeconds_.push_back(sinceRoundClosed_.elapsed() / 1000.0);
  // The first round has no round time before it: its training plus gathering stands in. Without
  // it the next deadline was 1.5 × our training time (the minimum, 30 s, on the netlab), and a
  // peer that merged round 1 early closed round 2 alone before the others had even published.
  if (!sinceRoundClosed_.isValid() && !deadline) roundSeconds_.push_back(gather_->own.seconds + seconds);
  if (roundSeconds_.size() > 8) roundSeconds_.erase(roundSeconds_.begin());
  sinceRoundClosed_.start();
  if (deadline) {
    Q_EMIT message(QStringLiteral("Round %1 closed by its deadline after %2 s with %3 of %4 contributions")
                       .arg(gather_->round)
                       .arg(seconds, 0, 'f', 1)
                       .arg(gather_->arrived.size())
                       .arg(gather_->expected.size()));
    Q_EMIT noted(QStringLiteral("deadline"), {{"round", gather_->round},
                                              {"seconds", seconds},
                                              {"arrived", int(gather_->arrived.size())},
                                              {"expected", int(gather_->expected.size())}});
  }
  contentOf_.clear();
  for (const auto& [key, claims] : gather_->fetching) contentOf_[key.first] = key.second;
  countNoShows();
  contentOf_[swarm_.selfId()] = contrib_[gather_->round];
  std::vector<IncomingContribution> list;
  gather_->mergedClaims.clear();
  for (const auto& [sender, c] : gather_->arrived)
    if (!only || only->count(contentOf_[sender])) {
      list.push_back(c);
      gather_->mergedClaims[sender] = c.claims;
    }
  const qint64 r = gather_->round;
  nextClaims_ = plannedClaims(r + 1);
  QMetaObject::invokeMethod(
      worker_, [w = worker_, r, list, claims = nextClaims_] { w->merge(r, list, claims); }, Qt::QueuedConnection);
  gather_->gatherSecondsHint = seconds;
  gather_->deadlineHit = deadline;
}

double Node::trainerBusyFraction() const {
  if (!sinceFirstStep_.isValid()) return 0;
  const double wall = sinceFirstStep_.elapsed() / 1000.0 + firstStepSeconds_;
  return wall > 0 ? std::min(1.0, stepSeconds_ / wall) : 0;
}

double Node::meanRoundSeconds() const {
  if (allRoundSeconds_.empty()) return 0;
  double sum = 0;
  for (double v : allRoundSeconds_) sum += v;
  return sum / double(allRoundSeconds_.size());
}

Status Node::exportModel(const QString& path) {
  if (!worker_) return makeError("no model yet: the node never started training");
  Status result = makeError("export did not run");
  QMetaObject::invokeMethod(
      worker_, [&] { result = worker_->exportTo(path); }, Qt::BlockingQueuedConnection);
  return result;
}

void Node::stop() {
  if (stopping_) return;
  stopping_ = true;
  deadline_.stop();
  joinWindow_.stop();
  resyncWatchdog_.stop();
  if (worker_)
    QMetaObject::invokeMethod(
        worker_, [w = worker_] { w->stop(); }, Qt::BlockingQueuedConnection);
  announce();  // claims released: others re-claim our experts without waiting for the lease
  // Queued, not emitted here: the trainer's last `persisted` reports were posted to this thread
  // while stop() waited for its writes, and they record the last rounds in the ledger first.
  QMetaObject::invokeMethod(
      this, [this] { Q_EMIT finished(); }, Qt::QueuedConnection);
}

}  // namespace es::node