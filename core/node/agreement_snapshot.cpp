// Agreement: catching up with the swarm from a merged-state snapshot — newcomers, and peers that
// merged a different set of contributions than the majority and could not repair it. A watchdog
// keeps the resync from waiting forever (issue 15: no state ever makes the trainer wait forever).
#include "core/node/agreement.h"

#include "core/node/node_util.h"
#include "core/node/rules/peer_rules.h"

namespace es::node {

using detail::q;

namespace {
// How far past the swarm's round an adoptable snapshot may be: the swarm's median lags the
// fastest peers by the round in progress, and a peer's record by one more while it announces.
constexpr std::int64_t kSnapshotRoundSlack = 2;
}  // namespace

// Start fetching the swarm's snapshot (bestAnnouncedSnapshot), wait for the majority's, or
// converge on the smallest id; the watchdog (below) keeps any of these from waiting forever.
void Agreement::tryResync() {
  if (resyncWanted_) watchResync();
  if (!pending_.content.empty() || repair_) return;  // a repair falls back here if it fails
  const auto best = bestAnnouncedSnapshot();
  std::optional<Candidate> chosen = best;
  // A known majority (checkAgreement), or two others that share a base: their snapshot is what we
  // wait for, even when none exists yet (they write one on demand) — never "keep ours".
  if (!chosen && majorityElsewhere_ && (hasAnnouncers() || !majority_.members.empty())) {
    if (!waitingForMajority_) {
      log_.say(QStringLiteral("Out of step with the majority: waiting for its next snapshot"));
      log_.note(QStringLiteral("waitingForMajority"), {});
    }
    waitingForMajority_ = true;
    return;  // the next record calls us again when their records announce it
  }
  if (!chosen) chosen = convergeOnLowestId();
  if (!chosen) return;
  waitingForMajority_ = false;
  log_.say(QStringLiteral("Fetching the swarm's snapshot of round %1 (%2 peers announce it)")
               .arg(chosen->round)
               .arg(chosen->announcers));
  log_.note(QStringLiteral("resync"), {{"round", qint64(chosen->round)}, {"announcers", chosen->announcers}});
  pending_.doneBytes = 0;
  startSnapshotFetch(*chosen);  // refused by the quota: tried again on the next record
}

// The snapshot to take (standing.h, chooseSnapshot): the newest adoptable one that two peers
// announce and that carries half the weight of all announcers — votes weigh the work each
// announcer did for us, so fresh Sybil keys do not outvote the peers we merged with. Out of step
// with a known majority (checkAgreement), only that majority's snapshots count: the other odd
// peers out announce the state we are leaving. Snapshots that failed or were refused are skipped;
// one that stalled comes after every other candidate.
std::optional<Agreement::Candidate> Agreement::bestAnnouncedSnapshot() const {
  SnapshotBallot ballot;
  for (const auto& p : swarm_.peers()) {
    if (peers_.isBanned(p.id) || (!majority_.members.empty() && !majority_.members.count(p.id))) continue;
    for (const auto& [round, id] : p.announced.snapshot)
      if (!badSnapshots_.count(id)) ballot.votes[{round, id}].insert(p.id);
  }
  // A snapshot of the round we merged counts: being out of step means our state of that round is
  // not the swarm's (the netlab's partition: the odd peer out merged round 4 with 5 of 6, the
  // others' round-4 snapshot was there, and `>` ignored it).
  // From a known majority: any of its snapshots since the round we split from it.
  ballot.oldest = majority_.members.empty() ? own_.mergedRound : majority_.since;
  ballot.newest = newestAdoptableRound();
  ballot.stalled = stalledSnapshots_;
  const auto choice = chooseSnapshot(ballot, peers_.standing());
  if (!choice) return std::nullopt;
  return Candidate{choice->round, choice->contentId, choice->announcers};
}

// Never past the swarm's round (the median of the running peers' rounds, peer_rules.h) by more
// than the round in progress: two Sybil keys announcing round 10^9 are not "the newest".
std::int64_t Agreement::newestAdoptableRound() const {
  return std::max<std::int64_t>(swarmRound(swarm_.peers()), own_.mergedRound) + kSnapshotRoundSlack;
}

bool Agreement::hasAnnouncers() const {
  for (const auto& p : swarm_.peers())
    if (!peers_.isBanned(p.id) && !p.announced.snapshot.empty()) return true;
  return false;
}

// Nobody agrees (every peer merged alone, e.g. after a stall or a fresh start in which nobody saw
// anybody): converge on the peer with the smallest id among us and those that announce a
// snapshot of the round we merged or later (theirs is another state of the same round). That
// peer keeps its state; the others take its newest snapshot, or wait for it. Without the
// same-round snapshots, peers that all diverged in one round waited for each other forever.
std::optional<Agreement::Candidate> Agreement::convergeOnLowestId() {
  const auto peers = swarm_.peers();
  const SwarmPeer* lowest = nullptr;
  for (const auto& p : peers)
    if (!peers_.isBanned(p.id) && !p.announced.snapshot.empty() &&
        p.announced.snapshot.rbegin()->first >= own_.mergedRound && (!lowest || p.id < lowest->id))
      lowest = &p;
  if (!lowest || swarm_.selfId() < lowest->id) {
    resyncWanted_ = false;  // we are the reference the others converge on
    log_.say(QStringLiteral("Peers disagree and no snapshot is shared; keeping our state as the reference"));
    log_.note(QStringLiteral("keepingReference"), {});
    return std::nullopt;
  }
  const auto& newest = *lowest->announced.snapshot.rbegin();
  if (badSnapshots_.count(newest.second) || newest.first > newestAdoptableRound()) return std::nullopt;
  return Candidate{newest.first, newest.second, 1};
}

// Within the predicted bound (Node::snapshotSizes), in its own folder, within the quota.
bool Agreement::startSnapshotFetch(const Candidate& c) {
  if (!detail::isSafeId(c.content)) return false;
  pending_.content = c.content;
  pending_.round = c.round;
  pending_.unserved.invalidate();
  if (adoptOwnCopy()) return true;
  const auto limits = host_.snapshotSizes(c.round);
  if (!folder_.allows(limits.most(), host_.bytesComing(), QStringLiteral("the snapshot of round %1").arg(c.round),
                      own_.round)) {
    pending_.content = {};
    return false;
  }
  if (auto s = swarm_.fetch(c.content, folder_.snapshotFolder(c.content), limits); !s) {
    log_.say(QStringLiteral("Cannot fetch the snapshot: %1").arg(q(s.error())));
    pending_.content = {};
    return false;
  }
  return true;
}

// The swarm's snapshot is one we published (we merged that state, then a round the swarm gave
// up): our file is that content. The p2p session answers no fetch of what it publishes itself
// (the watchdog then waited `deadline.max_seconds` for bytes that never came), and a fetched file
// is deleted when dropped, while ours must go on seeding.
bool Agreement::adoptOwnCopy() {
  const auto file = own_.snapshotFiles.find(pending_.content);
  if (file == own_.snapshotFiles.end()) return false;
  pending_.ours = true;
  log_.say(QStringLiteral("The swarm's snapshot of round %1 is our own; adopting our copy").arg(pending_.round));
  host_.adoptSnapshot(file->second, pending_.round, pending_.content);
  return true;
}

bool Agreement::fetched(const ContentId& id, const std::string& path) {
  if (!pending_.content.empty() && id == pending_.content) {
    log_.say(QStringLiteral("Snapshot fetched; adopting it"));
    host_.adoptSnapshot(path, pending_.round, pending_.content);
    return true;
  }
  if (!repair_ || !repair_->missing.count(id)) return false;
  repairFetched(id, path);
  return true;
}

// A snapshot that broke its limits is never chosen again. One whose transfer failed (a torrent or
// file error, not a refusal) is started again from scratch, twice at most, as a contribution is:
// libtorrent 2.0.8 fails a hybrid download now and then with "v1 and v2 hashes do not describe the
// same data" (a newcomer then fell back to an older round's snapshot: 2 of 11 tst_swarm_adversary
// runs). Then the next candidate.
bool Agreement::fetchFailed(const ContentId& id, const std::string& reason, bool refused) {
  if (repair_ && repair_->missing.count(id)) {
    abandonRepair(QStringLiteral("fetching %1 failed").arg(q(id).left(16)));
    return true;
  }
  if (pending_.content.empty() || id != pending_.content) return false;
  if (!refused) {
    fetchSnapshotAgain(QStringLiteral("its fetch failed"));
    return true;
  }
  dropPendingSnapshot(QStringLiteral("refused: ") + q(reason), true);
  retryResyncIn(0);
  return true;
}

void Agreement::fetchSnapshotAgain(const QString& why) {
  const bool again = folder_.failedAgain(pending_.content) <= 2;
  dropPendingSnapshot(why + (again ? QStringLiteral("; trying it again") : QString()), !again);
  if (again) return retryResyncIn(500);
  tryResync();
}

// A deferred retry runs only while we are still out of step: a record may have got a snapshot
// fetched and adopted meanwhile, and a retry then fetched that snapshot again while we trained on
// it (CI, tst_node_rounds, 2026-12-05).
void Agreement::retryResyncIn(int ms) {
  QTimer::singleShot(ms, this, [this] {
    if (resyncWanted_ && !stopped_) tryResync();
  });
}

void Agreement::snapshotAdopted(std::int64_t round, const std::string& fingerprint, const QString& error,
                                bool contentAtFault) {
  if (!error.isEmpty() && !contentAtFault) {
    log_.say(QStringLiteral("Snapshot unreadable here: %1").arg(error));
    log_.note(QStringLiteral("snapshotUnreadable"), {{"error", error}});
    return fetchSnapshotAgain(QStringLiteral("its file could not be read"));
  }
  if (!error.isEmpty() && pending_.ours) {  // our own file: this disk's problem, nobody's lie
    log_.say(QStringLiteral("Our own snapshot refused: %1").arg(error));
    dropPendingSnapshot(QStringLiteral("refused"), true);
    return tryResync();
  }
  if (!error.isEmpty()) {
    log_.say(QStringLiteral("Snapshot refused: %1").arg(error));
    log_.note(QStringLiteral("snapshotRefused"), {{"error", error}});
    // An honest peer announces only the snapshot it wrote of its own merged state, which is
    // finite, of this run and of the round it names: whoever announced this one lied.
    for (const auto& p : swarm_.peers()) {
      const auto it = p.announced.snapshot.find(pending_.round);
      if (it == p.announced.snapshot.end() || it->second != pending_.content) continue;
      host_.ban(p.id, "announced a snapshot that was refused: " + error.toStdString());
      log_.say(QStringLiteral("Peer banned. Peer: \"%1\". Reason: announced that snapshot").arg(q(p.id).left(16)));
    }
    dropPendingSnapshot(QStringLiteral("refused"), true);
    return tryResync();  // the next candidate, or wait for one
  }
  pending_.content = {};
  pending_.ours = false;
  repair_.reset();
  endResync();
  host_.tookSnapshot(round, fingerprint);
}

void Agreement::dropPendingSnapshot(const QString& why, bool never) {
  if (pending_.content.empty()) return;
  log_.say(QStringLiteral("Dropping the snapshot %1: %2").arg(q(pending_.content).left(16), why));
  if (never) {
    if (badSnapshots_.size() >= 256) badSnapshots_.clear();  // bounded: each record names ≤ 2 snapshots
    badSnapshots_.insert(pending_.content);
  }
  if (!pending_.ours) swarm_.retire(pending_.content, true);
  pending_.content = {};
  pending_.ours = false;
  pending_.doneBytes = 0;
  pending_.unserved.invalidate();
}

}  // namespace es::node
