// Catching up with the swarm from a merged-state snapshot: newcomers, and peers that merged a
// different set of contributions than the majority.
#include "core/node/node.h"
#include "core/node/node_util.h"
#include "core/node/rules/peer_rules.h"

#include <QDir>

#include <map>
#include <optional>
#include <set>

namespace es::node {

using detail::q;

namespace {
// How far past the swarm's round an adoptable snapshot may be: the swarm's median lags the
// fastest peers by the round in progress, and a peer's record by one more while it announces.
constexpr qint64 kSnapshotRoundSlack = 2;
}  // namespace

// Start fetching the swarm's snapshot (bestAnnouncedSnapshot), wait for the majority's, or
// converge on the smallest id; the watchdog (below) keeps any of these from waiting forever.
void Node::tryResync() {
  if (resyncWanted_) watchResync();
  if (!pendingSnapshot_.empty() || repair_) return;  // a repair falls back here if it fails
  const auto best = bestAnnouncedSnapshot();
  std::optional<std::pair<qint64, ContentId>> chosen;
  if (best) chosen = best->first;
  // A known majority (checkAgreement), or two others that share a base: their snapshot is what we
  // wait for, even when none exists yet (they write one on demand) — never "keep ours".
  if (!chosen && majorityElsewhere_ && (hasAnnouncers() || !majority_.empty())) {
    if (!waitingForMajority_)
      Q_EMIT message(QStringLiteral("Out of step with the majority: waiting for its next snapshot"));
    waitingForMajority_ = true;
    return;  // peersChanged calls us again when their records announce it
  }
  if (!chosen) chosen = convergeOnLowestId();
  if (!chosen) return;
  waitingForMajority_ = false;
  Q_EMIT message(QStringLiteral("Fetching the swarm's snapshot of round %1 (%2 peers announce it)")
                     .arg(chosen->first)
                     .arg(best ? best->second : 1));
  Q_EMIT noted(QStringLiteral("resync"), {{"round", chosen->first}, {"announcers", best ? best->second : 1}});
  pendingDoneBytes_ = 0;
  startSnapshotFetch(chosen->first, chosen->second);  // refused by the quota: tried again on the next record
}

// The snapshot to take (core/node/rules/standing.h, chooseSnapshot): the newest adoptable one that two
// peers announce and that carries half the weight of all announcers — votes weigh the work each
// announcer did for us, so fresh Sybil keys do not outvote the peers we merged with. Out of step
// with a known majority (checkAgreement), only that majority's snapshots count: the other odd
// peers out announce the state we are leaving. Snapshots that failed or were refused are skipped;
// one that stalled comes after every other candidate. → ((round, id), announcers).
std::optional<std::pair<std::pair<qint64, ContentId>, int>> Node::bestAnnouncedSnapshot() const {
  SnapshotBallot ballot;
  for (const auto& p : swarm_.peers()) {
    if (isBanned(p.id) || (!majority_.empty() && !majority_.count(p.id))) continue;
    for (const auto& [round, id] : p.announced.snapshot)
      if (!badSnapshots_.count(id)) ballot.votes[{round, id}].insert(p.id);
  }
  // A snapshot of the round we merged counts: being out of step means our state of that round is
  // not the swarm's (the netlab's partition: the odd peer out merged round 4 with 5 of 6, the
  // others' round-4 snapshot was there, and `>` ignored it).
  // From a known majority: any of its snapshots since the round we split from it.
  ballot.oldest = majority_.empty() ? mergedRound_ : majoritySince_;
  ballot.newest = newestAdoptableRound();
  ballot.stalled = stalledSnapshots_;
  const auto choice = chooseSnapshot(ballot, standing_);
  if (!choice) return std::nullopt;
  return std::pair{std::pair{choice->round, choice->contentId}, choice->announcers};
}

// Never past the swarm's round (the median of the running peers' rounds, peer_rules.h) by more
// than the round in progress: two Sybil keys announcing round 10^9 are not "the newest".
qint64 Node::newestAdoptableRound() const {
  return std::max<qint64>(swarmRound(swarm_.peers()), mergedRound_) + kSnapshotRoundSlack;
}

bool Node::hasAnnouncers() const {
  for (const auto& p : swarm_.peers())
    if (!isBanned(p.id) && !p.announced.snapshot.empty()) return true;
  return false;
}

// Nobody agrees (every peer merged alone, e.g. after a stall or a fresh start in which nobody saw
// anybody): converge on the peer with the smallest id among us and those that announce a
// snapshot of the round we merged or later (theirs is another state of the same round). That
// peer keeps its state; the others take its newest snapshot, or wait for it. Without the
// same-round snapshots, peers that all diverged in one round waited for each other forever.
// Returns the (round, content id) to fetch, or nothing.
std::optional<std::pair<qint64, ContentId>> Node::convergeOnLowestId() {
  const SwarmPeer* lowest = nullptr;
  const auto peers = swarm_.peers();
  for (const auto& p : peers)
    if (!isBanned(p.id) && !p.announced.snapshot.empty() && p.announced.snapshot.rbegin()->first >= mergedRound_ &&
        (!lowest || p.id < lowest->id))
      lowest = &p;
  if (!lowest || swarm_.selfId() < lowest->id) {
    resyncWanted_ = false;  // we are the reference the others converge on
    Q_EMIT message(QStringLiteral("Peers disagree and no snapshot is shared; keeping our state as the reference"));
    return std::nullopt;
  }
  const auto& newest = *lowest->announced.snapshot.rbegin();
  if (badSnapshots_.count(newest.second)) return std::nullopt;
  if (newest.first > newestAdoptableRound()) return std::nullopt;
  return newest;
}

void Node::onSnapshotAdopted(qint64 round, const QString& fingerprint, const QString& error, bool contentAtFault) {
  if (!error.isEmpty() && !contentAtFault) {
    Q_EMIT message(QStringLiteral("Snapshot unreadable here: %1").arg(error));
    return fetchSnapshotAgain(QStringLiteral("its file could not be read"));
  }
  if (!error.isEmpty()) {
    Q_EMIT message(QStringLiteral("Snapshot refused: %1").arg(error));
    // An honest peer announces only the snapshot it wrote of its own merged state, which is
    // finite, of this run and of the round it names: whoever announced this one lied.
    for (const auto& p : swarm_.peers()) {
      const auto it = p.announced.snapshot.find(pendingSnapshotRound_);
      if (it == p.announced.snapshot.end() || it->second != pendingSnapshot_) continue;
      ban(p.id, "announced a snapshot that was refused: " + error.toStdString());
      Q_EMIT message(
          QStringLiteral("Peer banned. Peer: \"%1\". Reason: announced that snapshot").arg(q(p.id).left(16)));
    }
    dropPendingSnapshot(QStringLiteral("refused"), true);
    return tryResync();  // the next candidate, or wait for one
  }
  pendingSnapshot_ = {};
  repair_.reset();
  held_.reset();  // built on the state we left
  ++baseEpoch_;   // and so is a contribution still being hashed
  forgetContributionsAfter(round);
  endResync();
  mergedRound_ = round;
  fingerprints_.clear();  // what we merged before was not the swarm's state
  setDigests_.clear();
  noteFingerprint(round, fingerprint.toStdString());
  round_ = round + 1;
  gather_.reset();
  deadline_.stop();
  Q_EMIT message(QStringLiteral("Took the swarm's snapshot of round %1; training round %2").arg(round).arg(round_));
  Q_EMIT noted(QStringLiteral("snapshot"), {{"round", round}, {"training", round_}});
  announce();
}

// Our contributions of the rounds after `round` were built on the state we just left. Our record
// must not name them beside the new state: the others would take them for the rewrite and close
// the round on a stale contribution (tst_node_rounds aSplitThreeWaysComesBackToOneState). The
// trainer sends those rounds again on the new base.
void Node::forgetContributionsAfter(qint64 round) { contrib_.erase(contrib_.upper_bound(round), contrib_.end()); }

void Node::noteFingerprint(qint64 round, const std::string& fingerprint) {
  fingerprints_[round] = fingerprint;
  while (fingerprints_.size() > 2) fingerprints_.erase(fingerprints_.begin());
}

// Agreement (docs/ARCHITECTURE.md, "Agreement"): every record carries the fingerprint of the state its
// peer merged for its last two rounds. For each of our last two rounds, the live peers that
// merged it group by fingerprint. A group holds the swarm's state once it has more than half of
// the weight of those peers plus those still gathering that round (us included), or, when none is
// still gathering it, if it is the heaviest (a tie goes to the smaller fingerprint). Weight is
// standing (core/node/rules/standing.h): 1 + the rounds we merged the peer's work before the judged
// round (standingBefore); among peers we merged equally often this is a head count, so every
// peer picks the same group. A reporter with neither a contribution to the round nor such work
// has no say. Deciding on fewer was wrong in the
// netlab: a cut peer saw only the other cut peer's record, took the tie and adopted that peer's odd state. Both rounds,
// because a peer whose deadline hit early has merged the next round before the others report the one it merged alone. A
// peer that skipped the round (it took a later snapshot) or is behind it has no say.
std::optional<Node::StateGroup> Node::swarmStateOf(qint64 round, const std::string& own) const {
  std::map<std::string, std::set<PeerId>> groups;  // fingerprint → peers (ordered: ties → smaller)
  groups[own].insert(swarm_.selfId());
  std::set<PeerId> reporting{swarm_.selfId()}, gathering;
  const Standing& standing = standingBefore(round);
  for (const auto& p : swarm_.peers()) {
    const Announcement& a = p.announced;
    if (isBanned(p.id) || a.claims.empty()) continue;
    if (auto m = a.merged.find(round); m != a.merged.end()) {
      // A say on the round: a contribution to it, or work of ours merged before it. Weighed by
      // the standing from before the round, fresh keys that report a state of their own would
      // otherwise outvote the peers of a fresh run, who have only the round itself to show.
      if (!a.contrib.count(round) && voteWeight(standing, p.id) <= 1) continue;
      groups[m->second].insert(p.id);
      reporting.insert(p.id);
    } else if (a.round == round) {
      gathering.insert(p.id);
    }
  }
  const std::int64_t reached = totalWeight(standing, reporting) + totalWeight(standing, gathering);
  if (groups.size() < 2) return std::nullopt;  // nobody disagrees (yet)
  // The heaviest group is the swarm's (votes weigh accepted work, core/node/rules/standing.h: fresh keys
  // reporting a state of their own do not make us the odd one out); ties → smaller fingerprint.
  auto largest = groups.begin();
  for (auto it = groups.begin(); it != groups.end(); ++it)
    if (totalWeight(standing, it->second) > totalWeight(standing, largest->second)) largest = it;
  if (2 * totalWeight(standing, largest->second) <= reached && !gathering.empty())
    return std::nullopt;  // not decided yet
  return StateGroup{largest->first, largest->second, groups[own].size()};
}

// A peer outside the swarm's group is out of step in the round the split happened — before it
// trains a round on a base nobody else holds — and takes the group's snapshot. A peer inside it
// that sees dissent writes a snapshot of its state if it has none (snapshots are written every
// `snapshot_every` rounds otherwise), so the others can take it.
void Node::checkAgreement() {
  for (const auto& [round, own] : fingerprints_) {
    const auto group = swarmStateOf(round, own);
    if (!group) continue;
    if (group->fingerprint == own) {
      if (worker_ && !snapshots_.count(mergedRound_) && snapshotOffered_ < mergedRound_) {
        Q_EMIT message(
            QStringLiteral(
                "Some peers merged round %1 into another state than the swarm's: publishing a snapshot of round %2")
                .arg(round)
                .arg(mergedRound_));
        snapshotOffered_ = mergedRound_;
        QMetaObject::invokeMethod(
            worker_, [w = worker_] { w->writeSnapshotNow(); }, Qt::QueuedConnection);
      }
      continue;
    }
    if (round <= gaveUpThrough_) continue;  // we waited for that state in vain; the next round tries again
    majority_ = group->members;             // grows as their records arrive
    if (resyncWanted_ && majorityState_ == group->fingerprint) return;  // on it already
    if (!pendingSnapshot_.empty())  // a resync chosen on other grounds: this one is better informed
      dropPendingSnapshot(QStringLiteral("the majority's state is known now"), false);
    Q_EMIT message(
        QStringLiteral(
            "Out of step: %1 peers merged round %2 into state %3, %4 (with us) into our %5; taking their snapshot")
            .arg(group->members.size())
            .arg(round)
            .arg(q(group->fingerprint), QString::number(group->ours), q(own)));
    majorityState_ = group->fingerprint;
    majoritySince_ = round;
    resyncWanted_ = majorityElsewhere_ = true;
    // The round we are gathering is built on the state we give up: merging it only makes another
    // odd state (the netlab: a cut peer merged its next round alone while the snapshot came). The
    // trainer waits at the boundary until the snapshot is adopted.
    if (gather_ && !gather_->closing) {
      held_ = gather_->own;
      gather_.reset();
      deadline_.stop();
    }
    // The set they merged, merged again here, is their state at a fraction of a snapshot's bytes.
    watchResync();
    if (!startRepair(round, *group)) tryResync();
    return;
  }
}

// The watchdog (issue 15: no state ever makes the trainer wait forever). Every
// `deadline.min_seconds` it looks at the resync in progress: a snapshot transfer that got no
// bytes since the last look gives way to another candidate if there is one; a resync that has not
// landed within `deadline.max_seconds` (and is not moving) is given up — we carry on from our own
// state, publish the round we held, and the agreement check tries again after the next round.
void Node::watchResync() {
  if (!outOfStepSince_.isValid()) outOfStepSince_.start();
  if (!resyncWatchdog_.isActive()) resyncWatchdog_.start(static_cast<int>(config_.policy.deadlineMinSeconds * 1000));
}

void Node::onResyncWatchdog() {
  if (!resyncWanted_ || stopping_) return outOfStepSince_.invalidate();
  if (repair_) {
    if (repairStalled()) abandonRepair(QStringLiteral("no bytes for %1 s").arg(config_.policy.deadlineMinSeconds));
    return resyncWatchdog_.start(static_cast<int>(config_.policy.deadlineMinSeconds * 1000));
  }
  bool moving = false;
  if (!pendingSnapshot_.empty()) {
    std::int64_t done = 0;
    for (const auto& t : swarm_.traffic().transfers)
      if (t.contentId == pendingSnapshot_) done = t.doneBytes;
    moving = done > pendingDoneBytes_;
    pendingDoneBytes_ = done;
  }
  if (!moving && outOfStepSince_.elapsed() > config_.policy.deadlineMaxSeconds * 1000) return giveUpResync();
  if (!pendingSnapshot_.empty() && !moving) {
    stalledSnapshots_.insert(pendingSnapshot_);
    if (const auto next = bestAnnouncedSnapshot(); next && next->first.second != pendingSnapshot_) {
      dropPendingSnapshot(QStringLiteral("no bytes for %1 s").arg(config_.policy.deadlineMinSeconds), false);
      tryResync();
    }
  } else if (pendingSnapshot_.empty() && !waitingForMajority_) {
    tryResync();
  }
  resyncWatchdog_.start(static_cast<int>(config_.policy.deadlineMinSeconds * 1000));
}

void Node::dropPendingSnapshot(const QString& why, bool never) {
  if (pendingSnapshot_.empty()) return;
  Q_EMIT message(QStringLiteral("Dropping the snapshot %1: %2").arg(q(pendingSnapshot_).left(16), why));
  if (never) {
    if (badSnapshots_.size() >= 256) badSnapshots_.clear();  // bounded: each record names ≤ 2 snapshots
    badSnapshots_.insert(pendingSnapshot_);
  }
  swarm_.retire(pendingSnapshot_, true);
  pendingSnapshot_ = {};
  pendingDoneBytes_ = 0;
}

// Out of step no more (the snapshot landed, or we gave up waiting for it).
void Node::endResync() {
  stalledSnapshots_.clear();
  resyncWatchdog_.stop();
  outOfStepSince_.invalidate();
  resyncWanted_ = majorityElsewhere_ = waitingForMajority_ = false;
  majority_.clear();
  majorityState_.clear();
}

void Node::giveUpResync() {
  Q_EMIT message(
      QStringLiteral("No snapshot of the swarm's state landed in %1 s; carrying on from our own state after round %2")
          .arg(outOfStepSince_.elapsed() / 1000)
          .arg(mergedRound_));
  dropPendingSnapshot(QStringLiteral("given up"), false);
  endResync();
  gaveUpThrough_ = mergedRound_;
  if (held_) {
    const RoundTrained trained = *held_;
    held_.reset();
    onRoundTrained(trained);
  }
}

}  // namespace es::node
