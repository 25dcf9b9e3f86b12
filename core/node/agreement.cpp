// Agreement: the votes on the states the swarm merged (majority.h decides them), and what a peer
// out of step does first. The resync: agreement_snapshot.cpp; the repair: agreement_repair.cpp.
#include "core/node/agreement.h"

#include "core/node/node_util.h"
#include "core/node/rules/merged_set.h"

namespace es::node {

using detail::q;

Agreement::Agreement(Host& host, Swarm& swarm, PeerBook& peers, RunFolder& folder, const OwnRecord& own,
                     const NodeConfig& config, const NodeLog& log)
    : host_(host), swarm_(swarm), peers_(peers), folder_(folder), own_(own), config_(config), log_(log) {
  watchdog_.setSingleShot(true);
  connect(&watchdog_, &QTimer::timeout, this, [this] { onWatchdog(); });
}

void Agreement::wantResync(bool majorityElsewhere) {
  resyncWanted_ = true;
  majorityElsewhere_ = majorityElsewhere;
}

// For each of our last two rounds, the live peers that merged it group by fingerprint. A group
// holds the swarm's state once it has more than half of the weight of those peers plus those still
// gathering that round (us included), or, when none is still gathering it, if it is the heaviest
// (a tie goes to the smaller fingerprint). Weight is standing (standing.h): 1 + the rounds we
// merged the peer's work before the judged round (PeerBook::standingBefore); among peers we merged
// equally often this is a head count, so every peer picks the same group. A reporter with neither a
// contribution to the round that we merged ourselves nor such work has no say of its own: naming an
// id costs nothing, and fresh keys naming ghost contributions outvoted the honest standing at
// a3cdfca (issue 37 item 2); it adds its weight only to a state that a reporter with a say (or we)
// holds. Sybils can thus swell an honest minority's state, never bring one of their own. Deciding on fewer was wrong in
// the netlab: a cut peer saw only the other cut peer's record, took the tie and adopted that peer's odd state. Both
// rounds, because a peer whose deadline hit early has merged the next round before the others report the one it merged
// alone. A peer that skipped the round (it took a later snapshot) or is behind it has no say.
std::optional<Agreement::SwarmState> Agreement::swarmStateOf(std::int64_t round, const std::string& own) const {
  StateBallot ballot;
  ballot.reports[own].insert(swarm_.selfId());
  const Standing& standing = peers_.standingBefore(round);
  std::map<std::string, std::set<PeerId>> unvouched;  // state → reporters with a contribution only named
  for (const auto& p : swarm_.peers()) {
    const Announcement& a = p.announced;
    if (peers_.isBanned(p.id) || a.claims.empty()) continue;
    // A say on the round: its contribution to it, merged by us, or work of ours merged before it.
    // Weighed by the standing from before the round, fresh keys that report a state of their own
    // would otherwise outvote the peers of a fresh run, who have only the round itself to show.
    const bool say = peers_.acceptedIn(round, p.id) || voteWeight(standing, p.id) > 1;
    if (auto m = a.merged.find(round); m != a.merged.end()) {
      if (say)
        ballot.reports[m->second].insert(p.id);
      else if (a.contrib.count(round))
        unvouched[m->second].insert(p.id);
    } else if (a.round == round) {
      ballot.gathering.insert(p.id);
    } else if (say && !a.merged.empty() && a.merged.rbegin()->first > round) {
      ballot.passed.insert(p.id);  // merged it, and later ones: its state for it is out of its record
    }
  }
  // A reporter that only names a contribution we never got counts for a state that one with a
  // say holds too: after a partition the odd peer out never got the others' work, and must still
  // see them outnumber it — while fresh keys naming ghosts cannot raise a state of their own.
  for (const auto& [state, ids] : unvouched)
    if (const auto group = ballot.reports.find(state); group != ballot.reports.end())
      group->second.insert(ids.begin(), ids.end());
  if (ballot.reports.size() < 2) return std::nullopt;  // nobody disagrees (yet)
  const auto group = decideMajority(ballot, standing, true);
  if (!group) return std::nullopt;
  return SwarmState{*group, ballot.reports[own].size()};
}

// The state a decided majority merged `round` into (those still gathering it, us included, count
// against it), or nothing yet. A member whose record names another state for the round before
// disagrees with our base: the agreement check handles that.
// A say here takes work we merged before, or this round's contribution delivered to us in full:
// a fresh key's report of the set it merged costs nothing, and fresh keys published a set that
// left chosen honest contributions out, which honest peers then closed the round on (issue 37
// item 2). Whatever set we close on, we merge it under our own checks.
std::optional<StateGroup> Agreement::mergedByMajority(const RoundGather& gather) const {
  const std::int64_t round = gather.round();
  StateBallot ballot;
  ballot.gathering.insert(swarm_.selfId());
  const auto ownBase = own_.fingerprintOf(round - 1);
  for (const auto& p : swarm_.peers()) {
    const Announcement& a = p.announced;
    if (peers_.isBanned(p.id) || a.claims.empty()) continue;
    if (auto m = a.merged.find(round); m != a.merged.end()) {
      if (voteWeight(peers_.standing(), p.id) <= 1 && !gather.hasArrived(p.id)) continue;  // no say
      const auto base = a.merged.find(round - 1);
      if (base != a.merged.end() && (!ownBase || base->second != *ownBase)) continue;
      ballot.reports[m->second].insert(p.id);
    } else if (a.round == round) {
      ballot.gathering.insert(p.id);
    }
  }
  return decideMajority(ballot, peers_.standing(), false);
}

// The set the majority says it merged: the digest most of its members' weight reports for the round.
std::string Agreement::majoritySetDigest(std::int64_t round, const std::set<PeerId>& members) const {
  std::map<std::string, std::int64_t> votes;
  for (const auto& p : swarm_.peers())
    if (auto s = p.announced.sets.find(round);
        members.count(p.id) && p.id != swarm_.selfId() && s != p.announced.sets.end())
      votes[s->second] += voteWeight(peers_.standing(), p.id);
  std::string best;
  for (const auto& [digest, n] : votes)
    if (best.empty() || n > votes[best]) best = digest;
  return best;
}

// A peer that lags the others by part of a round (back from a partition, a slow link) would
// otherwise gather to its own deadline, merge another set than theirs and repair afterwards: on
// the netlab a cut peer gathered round 8 for two minutes after the others had merged it, and
// missed round 9 as well. When a decided majority's records name the state and the set they
// merged the round into, and we hold every contribution of that set on the same base, merging
// that set now lands on their bytes.
std::optional<std::set<ContentId>> Agreement::swarmSetFor(const RoundGather& gather) const {
  if (resyncWanted_ || repair_) return std::nullopt;
  const std::int64_t r = gather.round();
  const auto group = mergedByMajority(gather);
  if (!group) return std::nullopt;
  const std::string digest = majoritySetDigest(r, group->members);
  if (digest.empty()) return std::nullopt;
  std::set<ContentId> held;  // the contributions here
  if (auto own = own_.contrib.find(r); own != own_.contrib.end()) held.insert(own->second);
  for (const auto& [sender, c] : gather.contributions())
    if (gather.hasArrived(sender)) held.insert(c.content);
  auto set = findMergedSet(held, digest);
  if (!set) return set;
  log_.say(QStringLiteral("Round %1: %2 peers merged it with %3 contributions, all here; closing it with their set")
               .arg(r)
               .arg(group->members.size())
               .arg(set->size()));
  log_.note(QStringLiteral("swarmSet"),
            {{"round", qint64(r)}, {"peers", int(group->members.size())}, {"contributions", int(set->size())}});
  return set;
}

// A peer outside the swarm's group is out of step in the round the split happened — before it
// trains a round on a base nobody else holds — and takes the group's snapshot. A peer inside it
// that sees dissent writes a snapshot of its state if it has none (snapshots are written every
// `snapshot_every` rounds otherwise), so the others can take it.
void Agreement::checkAgreement() {
  for (const auto& [round, own] : own_.fingerprints) {
    const auto state = swarmStateOf(round, own);
    if (!state) continue;
    if (state->group.fingerprint == own) {
      if (host_.trainerRunning() && !own_.snapshots.count(own_.mergedRound) && snapshotOffered_ < own_.mergedRound) {
        log_.say(QStringLiteral("Some peers merged round %1 into another state than the swarm's: publishing a "
                                "snapshot of round %2")
                     .arg(round)
                     .arg(own_.mergedRound));
        snapshotOffered_ = own_.mergedRound;
        host_.writeSnapshotNow();
      }
      continue;
    }
    if (round <= gaveUpThrough_) continue;  // we waited for that state in vain; the next round tries again
    return outOfStepIn(round, state->group, own, state->ours);
  }
}

void Agreement::outOfStepIn(std::int64_t round, const StateGroup& group, const std::string& own, std::size_t ours) {
  majority_.members = group.members;                                  // grows as their records arrive
  if (resyncWanted_ && majority_.state == group.fingerprint) return;  // on it already
  if (!pending_.content.empty())  // a resync chosen on other grounds: this one is better informed
    dropPendingSnapshot(QStringLiteral("the majority's state is known now"), false);
  log_.say(QStringLiteral("Out of step: %1 peers merged round %2 into state %3, %4 (with us) into our %5; taking "
                          "their snapshot")
               .arg(group.members.size())
               .arg(round)
               .arg(q(group.fingerprint), QString::number(ours), q(own)));
  log_.note(QStringLiteral("outOfStep"), {{"by", "records"},
                                          {"round", qint64(round)},
                                          {"members", int(group.members.size())},
                                          {"ours", int(ours)},
                                          {"state", q(group.fingerprint)}});
  majority_.state = group.fingerprint;
  majority_.since = round;
  resyncWanted_ = majorityElsewhere_ = true;
  // The round we are gathering is built on the state we give up: merging it only makes another
  // odd state (the netlab: a cut peer merged its next round alone while the snapshot came). The
  // trainer waits at the boundary until the snapshot is adopted.
  host_.holdGatheredRound();
  // The set they merged, merged again here, is their state at a fraction of a snapshot's bytes.
  watchResync();
  if (!startRepair(round, group)) tryResync();
}

}  // namespace es::node

namespace es::node {

// The watchdog. Every `deadline.min_seconds` it looks at the resync in progress: a snapshot
// transfer that got no bytes since the last look gives way to another candidate if there is one;
// a resync that has not landed within `deadline.max_seconds` (and is not moving) is given up — we
// carry on from our own state, publish the round we held, and the agreement check tries again
// after the next round. Sooner when nobody serves the snapshot: with no other candidate, a fetch
// that had no peer and no bytes at every look for two periods (60 s in the bundled run; NAT
// traversal to an announcer took 15-30 s on the netlab) is given up too — a newcomer whose run's
// peers had all left waited the bundled run's 600 s, and so would one whose snapshot only silent
// keys announce.
void Agreement::watchResync() {
  if (!outOfStepSince_.isValid()) outOfStepSince_.start();
  if (!watchdog_.isActive()) watchdog_.start(static_cast<int>(config_.policy.deadlineMinSeconds * 1000));
}

void Agreement::onWatchdog() {
  const int periodMs = static_cast<int>(config_.policy.deadlineMinSeconds * 1000);
  if (!resyncWanted_ || stopped_) return outOfStepSince_.invalidate();
  if (repair_) {
    if (repairStalled()) abandonRepair(QStringLiteral("no bytes for %1 s").arg(config_.policy.deadlineMinSeconds));
    return watchdog_.start(periodMs);
  }
  if (pending_.ours) return watchdog_.start(periodMs);  // our own file, in the trainer's queue: no transfer to watch
  bool moving = false, served = false;
  if (!pending_.content.empty()) {
    std::int64_t done = 0;
    for (const auto& t : swarm_.traffic().transfers)
      if (t.contentId == pending_.content) done = t.doneBytes, served = t.connections > 0;
    moving = done > pending_.doneBytes;
    pending_.doneBytes = done;
  }
  if (!moving && outOfStepSince_.elapsed() > config_.policy.deadlineMaxSeconds * 1000)
    return giveUpResync(
        QStringLiteral("No snapshot of the swarm's state landed in %1 s").arg(outOfStepSince_.elapsed() / 1000),
        QStringLiteral("deadline"));
  if (!pending_.content.empty() && !moving) {
    stalledSnapshots_.insert(pending_.content);
    if (const auto next = bestAnnouncedSnapshot(); next && next->content != pending_.content) {
      dropPendingSnapshot(QStringLiteral("no bytes for %1 s").arg(config_.policy.deadlineMinSeconds), false);
      tryResync();
    } else if (served) {
      pending_.unserved.invalidate();
    } else if (!pending_.unserved.isValid()) {
      pending_.unserved.start();
    } else if (pending_.unserved.elapsed() >= 2 * qint64(periodMs) - periodMs / 10) {  // 2 looks, timer jitter
      return giveUpResync(
          QStringLiteral("No peer served the swarm's snapshot for %1 s").arg(pending_.unserved.elapsed() / 1000),
          QStringLiteral("unserved"));
    }
  } else if (pending_.content.empty() && !waitingForMajority_) {
    tryResync();
  }
  watchdog_.start(periodMs);
}

// Out of step no more (the snapshot landed, or we gave up waiting for it).
void Agreement::endResync() {
  stalledSnapshots_.clear();
  watchdog_.stop();
  outOfStepSince_.invalidate();
  resyncWanted_ = majorityElsewhere_ = waitingForMajority_ = false;
  majority_.members.clear();
  majority_.state.clear();
}

void Agreement::giveUpResync(const QString& why, const QString& reason) {
  log_.say(QStringLiteral("%1; carrying on from our own state after round %2").arg(why).arg(own_.mergedRound));
  log_.note(QStringLiteral("resyncGivenUp"), {{"round", qint64(own_.mergedRound)}, {"reason", reason}});
  dropPendingSnapshot(QStringLiteral("given up"), false);
  endResync();
  gaveUpThrough_ = own_.mergedRound;
  host_.resumeHeldRound();
}

}  // namespace es::node
