// Node: what the agreement (agreement.h) asks of the node — our own state is the node's to change —
// and the trainer's answer to a repair.
#include "core/node/node.h"
#include "core/node/node_util.h"
#include "core/node/rules/first_round.h"
#include "core/sync/fetch_size.h"
#include "core/sync/work_ledger.h"

namespace es::node {

using detail::q;

void Node::holdGatheredRound() {
  if (!gather_ || gather_->closing()) return;
  held_ = gather_->own();
  gather_.reset();
  deadline_.stop();
}

void Node::resumeHeldRound() {
  if (!held_) return;
  const RoundTrained trained = *held_;
  held_.reset();
  onRoundTrained(trained);
}

void Node::writeSnapshotNow() {
  QMetaObject::invokeMethod(
      worker_, [w = worker_] { w->writeSnapshotNow(); }, Qt::QueuedConnection);
}

// The swarm is already into the round after the snapshot: we train only what is left of it, so
// our first contribution comes with the others' (rules/first_round.h; issue 37).
void Node::adoptSnapshot(const std::string& path, std::int64_t round, const ContentId& snapshot) {
  snapshotSkip_ = stepsTheSwarmTrained(round, snapshot);
  QMetaObject::invokeMethod(
      worker_, [w = worker_, p = q(path), round, skip = snapshotSkip_] { w->adoptSnapshot(p, round, skip); },
      Qt::QueuedConnection);
}

// From the peers that announce this snapshot (they merged `round`): when we heard each merge it,
// the training rate each announced for its last round (the medians of both), and whether most
// already name a contribution to the next round. Only announcers whose work we merged count when
// there are any (a peer resyncing): fresh keys copying the snapshot's id could otherwise make it
// train one step. A newcomer has merged nobody's work, and every announcer counts — what they can
// do then is bounded by the rule (one step at least, never more than a round).
int Node::stepsTheSwarmTrained(std::int64_t round, const ContentId& snapshot) const {
  FirstRoundPace pace;
  pace.syncEvery = config_.peer.syncEvery;
  pace.tokensPerStep = std::int64_t(config_.peer.trainer.train.batchSize) * config_.peer.trainer.model.seqLen;
  const bool byWork = peers_.anyMergedWork(swarm_.selfId());
  std::vector<double> since;
  int published = 0;
  for (const auto& p : swarm_.peers()) {
    const auto it = p.announced.snapshot.find(round);
    if (it == p.announced.snapshot.end() || it->second != snapshot || peers_.isBanned(p.id)) continue;
    if (byWork && !peers_.hasMergedWork(p.id)) continue;
    if (const auto s = pace_.secondsSinceMerged(p.id, round)) {
      since.push_back(*s);
      pace.tokensPerSecond.push_back(p.announced.tokensPerSecond);
      published += p.announced.contrib.count(round + 1) ? 1 : 0;
    }
  }
  if (since.empty()) return 0;
  pace.mostHavePublished = 2 * published > int(since.size());
  pace.secondsSinceSwarmBegan = detail::median(since);
  pace.ownSecondsPerStep = trainerSteps_.last().seconds;
  return firstRoundStepsToSkip(pace);
}

void Node::remerge(std::int64_t round, const std::vector<IncomingContribution>& set, const std::string& fingerprint) {
  QMetaObject::invokeMethod(
      worker_, [w = worker_, round, set, f = q(fingerprint)] { w->remerge(round, set, f); }, Qt::QueuedConnection);
}

void Node::tookSnapshot(std::int64_t round, const std::string& fingerprint) {
  held_.reset();  // built on the state we left
  ++baseEpoch_;   // and so is a contribution still being hashed
  forgetContributionsAfter(round);
  own_.mergedRound = round;
  own_.fingerprints.clear();  // what we merged before was not the swarm's state
  own_.setDigests.clear();
  own_.noteFingerprint(round, fingerprint);
  own_.round = round + 1;
  gather_.reset();
  sharded_.reset();  // its round is behind the snapshot
  outputDeadline_.stop();
  deadline_.stop();
  const int steps = config_.peer.syncEvery - snapshotSkip_;
  Q_EMIT message(QStringLiteral("Took the swarm's snapshot of round %1; training round %2 (%3 of its %4 steps: the "
                                "swarm is that far into it)")
                     .arg(round)
                     .arg(own_.round)
                     .arg(steps)
                     .arg(config_.peer.syncEvery));
  Q_EMIT noted(QStringLiteral("snapshot"),
               {{"round", qint64(round)}, {"training", qint64(own_.round)}, {"steps", steps}});
  announce();
}

// Our contributions of the rounds after `round` were built on the state we just left. Our record
// must not name them beside the new state: the others would take them for the rewrite and close
// the round on a stale contribution (tst_node_rounds aSplitThreeWaysComesBackToOneState). The
// trainer sends those rounds again on the new base.
void Node::forgetContributionsAfter(qint64 round) {
  own_.contrib.erase(own_.contrib.upper_bound(round), own_.contrib.end());
}

// Our own contribution of the round carries the base hash every honest one names (a stale one
// names another base of the same length: same size).
FetchLimits Node::contributionSizes(const PeerId& sender, const std::set<int>& claims, std::int64_t round,
                                    const std::string& baseHash) const {
  const sync::ContributionHeader header{runIdForFiles(), round, sender.str(), baseHash, config_.peer.codec};
  return {sync::contributionSizes(config_.peer.trainer.model, claims, header)};
}

// Every part of a snapshot's size is the run's but its work ledger's length (sync/swarm_state.h):
// bounded by the longest ledger a state of that round can hold; the ledger's reader is strict.
FetchLimits Node::snapshotSizes(std::int64_t round) const {
  const auto most = sync::snapshotBytes(config_.peer.trainer.model, runIdForFiles(), round, config_.peer.outer,
                                        sync::WorkLedger::maxEncodedBytes(round));
  return {{}, most};
}

void Node::onRemerged(qint64 round, const QString& fingerprint, const QString& sharedFingerprint, int accepted,
                      const QString& error) {
  const auto repaired = agreement_.remerged(round, error);
  if (!repaired) return;
  // The round's ledger row names the state the round ended in; written once it is durable.
  recorder_.repaired(round, repaired->contributions, accepted, sharedFingerprint.toStdString());
  Q_EMIT message(QStringLiteral("Repaired round %1: merged the majority's %2 contributions again, into its state %3")
                     .arg(round)
                     .arg(repaired->contributions)
                     .arg(fingerprint));
  Q_EMIT noted(QStringLiteral("repaired"),
               {{"round", round}, {"contributions", repaired->contributions}, {"fingerprint", fingerprint}});
  own_.noteSetDigest(round, repaired->digest);
  if (lastSummary_ && lastSummary_->round == round) {  // what the round line said is not true any more
    RoundSummary s = *lastSummary_;
    s.repaired = true;
    s.peers = accepted;
    s.fingerprint = fingerprint.toStdString();
    s.sharedFingerprint = sharedFingerprint.toStdString();
    s.valLoss.reset();  // measured on the state we left; not measured again
    Q_EMIT roundRepaired(s);
  }
  // The round we held (or are hashing) was built on the state we left: the trainer sends it
  // again, on this one.
  held_.reset();
  ++baseEpoch_;
  forgetContributionsAfter(round);
  own_.noteFingerprint(round, fingerprint.toStdString());
  announce();
}

}  // namespace es::node
