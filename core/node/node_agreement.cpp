// Node: what the agreement (agreement.h) asks of the node — our own state is the node's to change —
// and the trainer's answer to a repair.
#include "core/node/node.h"
#include "core/node/node_util.h"
#include "core/sync/fetch_size.h"

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

void Node::adoptSnapshot(const std::string& path, std::int64_t round) {
  QMetaObject::invokeMethod(
      worker_, [w = worker_, p = q(path), round] { w->adoptSnapshot(p, round); }, Qt::QueuedConnection);
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
  deadline_.stop();
  Q_EMIT message(QStringLiteral("Took the swarm's snapshot of round %1; training round %2").arg(round).arg(own_.round));
  Q_EMIT noted(QStringLiteral("snapshot"), {{"round", qint64(round)}, {"training", qint64(own_.round)}});
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

FetchLimits Node::snapshotSizes(std::int64_t round) const {
  return {{sync::snapshotBytes(config_.peer.trainer.model, runIdForFiles(), round, config_.peer.outer)}};
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
