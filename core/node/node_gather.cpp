// Node: gathering the round's contributions (docs/ARCHITECTURE.md, "One round, traced"). On every
// record the node makes one pass: who is waited for (PeerBook), what each live peer's record names
// for the round (RoundGather fetches it), whether a decided majority already merged the round
// with a set we hold (Agreement), and whether everything expected is here. The round closes then,
// or at its deadline.
#include "core/node/node.h"
#include "core/node/node_util.h"

namespace es::node {

using detail::q;

void Node::gather() {
  if (!gather_ || gather_->closing()) return;
  const qint64 r = gather_->round();
  // As soon as a record says so, not at our next close: a peer back in step after a partition
  // is waited for in the round it rejoins (the netlab's cut peer was left out one round more).
  liftInStepExclusions();
  std::set<PeerId> expected{swarm_.selfId()};
  for (const auto& p : peers_.livePeers(r)) expected.insert(p.id);
  // A run's start (nobody's work merged yet): peers we saw joining are waited for as well, until
  // they claim (then they are live) or two join windows after we first saw them — else the first
  // to end its window closed round 1 alone before the others had claimed (a second later on the
  // netlab) and raced ahead on short rounds. Fresh keys that never claim can hold such a round
  // only what fresh claimers already could (its deadline, or past it while onDeadline's cut-off
  // test counts every peer), and only for two join windows after we first saw them.
  if (!peers_.anyMergedWork(swarm_.selfId()))
    for (const auto& id : peers_.joiningPeers(2 * std::int64_t(config_.policy.joinWindowMs))) expected.insert(id);
  gather_->expect(std::move(expected));
  // No-shows are fetched from all the same (not waited for): one that delivers is back at once.
  std::set<PeerId> onAnotherBase;
  std::vector<std::pair<PeerId, ContentId>> wanted;
  for (const auto& p : peers_.livePeers(r, true)) {
    if (builtOnAnotherState(p)) onAnotherBase.insert(p.id);
    auto c = p.announced.contrib.find(r);
    if (c == p.announced.contrib.end()) {
      // Withdrawn: built on a state its sender left (forgetContributionsAfter); the rewrite follows.
      gather_->supersede(p.id, ContentId());
      continue;
    }
    if (announcesOurOwn(p.id, c->second)) continue;
    gather_->supersede(p.id, c->second);
    if (gather_->hasArrived(p.id)) continue;
    if (!gather_->names(p.id, c->second)) noteAnnounced(p, c->second);
    wanted.emplace_back(p.id, c->second);
  }
  const auto weightOf = [this](const PeerId& id) { return voteWeight(peers_.standing(), id); };
  bool heavyLive = false;
  for (const auto& p : peers_.livePeers(r, true)) heavyLive = heavyLive || weightOf(p.id) > 1;
  gather_->startFetches(std::move(wanted), weightOf, heavyLive);
  // A pass when a fetch may free its slot or turn silent (closeWithoutFreshKeys).
  if (const qint64 ms = gather_->msUntilASlotFrees(); ms >= 0) passAfter(ms + 50);
  if (const auto set = agreement_.swarmSetFor(*gather_)) return closeRound(false, &*set);
  if (gather_->complete(onAnotherBase, [](const PeerId&) { return true; })) return closeRound(false);
  closeWithoutFreshKeys(onAnotherBase);
}

// Once we can tell peers apart (we merged anyone's work), fresh keys (none of their work merged)
// hold a round for a bounded time only (issue 37 item 5; a key costs ~1 CPU-second, a round held
// to its deadline's minimum costs every honest peer that long):
// - one whose transfer brought no byte in a third of the deadline's minimum is not waited for
//   (fresh keys every round are never no-shows: bench/sybil_nodes "rotate");
// - none past the deadline without its floor (RoundGather::msUntilFreshDeadline: factor × the
//   typical round from the round's start, RoundTimes::freshDeadlineSeconds): keys that only
//   claim, with leases past their round, were waited for through their grace rounds to the
//   minimum, 30 s in the bundled run however short its rounds.
// A newcomer is a fresh key too: it is waited for while its transfer brings bytes or waits for a
// slot, until that deadline — less than a round behind us, it is in (c25e03a cut it at "as long
// again as the peers with work took", and a newcomer's first contributions never came that early).
void Node::closeWithoutFreshKeys(const std::set<PeerId>& onAnotherBase) {
  if (!peers_.anyMergedWork(swarm_.selfId())) return;
  const qint64 untilDeadline = gather_->msUntilFreshDeadline();
  const bool pastDeadline = untilDeadline <= 0;
  if (!pastDeadline) passAfter(untilDeadline + 10);
  const auto silent = pastDeadline ? std::set<PeerId>{} : gather_->silentSenders();
  if (!pastDeadline && silent.empty()) return;
  std::set<PeerId> skipped;
  const auto waitedFor = [&](const PeerId& id) {
    if (peers_.hasMergedWork(id) || (!pastDeadline && !silent.count(id))) return true;
    skipped.insert(id);
    return false;
  };
  if (!gather_->complete(onAnotherBase, waitedFor)) return;
  const qint64 r = gather_->round();
  if (pastDeadline) {
    const double trained = gather_->own().seconds;
    const double roundSeconds = roundTimes_.secondsSinceStart(trained);
    Q_EMIT message(QStringLiteral("Round %1: closing without %2 fresh peers' contributions (none in %3 s of the round)")
                       .arg(r)
                       .arg(skipped.size())
                       .arg(roundSeconds, 0, 'f', 1));
    Q_EMIT noted(QStringLiteral("freshKeysPastDeadline"),
                 {{"round", r},
                  {"keys", int(skipped.size())},
                  {"roundSeconds", roundSeconds},
                  {"holdSeconds", roundTimes_.freshHoldSeconds(config_.policy, trained)}});
  } else {
    Q_EMIT message(QStringLiteral("Round %1: closing without %2 fresh peers' contributions (no byte in %3 s)")
                       .arg(r)
                       .arg(skipped.size())
                       .arg(gather_->silentAfterMs() / 1000.0, 0, 'f', 1));
    Q_EMIT noted(QStringLiteral("silentFreshKeys"), {{"round", r}, {"keys", int(skipped.size())}});
  }
  closeRound(false, nullptr, true);
}

// A gather pass in `ms` (or sooner, if one is due sooner already).
void Node::passAfter(qint64 ms) {
  if (!pass_.isActive() || pass_.remainingTime() > ms) pass_.start(static_cast<int>(ms));
}

// A sender whose record names another state for the round before than ours trained on that state:
// what it sent is stale. If it is out of step it repairs or resyncs and sends the round again
// (supersede takes the new one), so its slot is not filled yet — closing on the stale one
// merged the round without it while it merged its rewrite: a split again, every round
// (tst_node_rounds aSplitThreeWaysComesBackToOneState). Still only until the deadline.
bool Node::builtOnAnotherState(const SwarmPeer& sender) const {
  const auto ours = own_.fingerprintOf(gather_->round() - 1);
  const auto theirs = sender.announced.merged.find(gather_->round() - 1);
  return ours && theirs != sender.announced.merged.end() && theirs->second != *ours;
}

// A contribution names its sender in its header, so no other peer's can have our content id: a
// peer announcing one of ours as its own is an impostor. Fetching it would make us download (and at
// the round's close retire, i.e. stop seeding) our own contribution, and nobody would get it.
bool Node::announcesOurOwn(const PeerId& sender, const ContentId& id) {
  for (const auto& [round, own] : own_.contrib) {
    if (own != id) continue;
    banSender(sender, "announced our own contribution of round " + std::to_string(round) + " as its own");
    return true;
  }
  return false;
}

// `peer` names `id` as its contribution of the round: it is owed those bytes' verdict. The
// claims it held in the round (round_claims.h); its record's current ones only when no record of
// that round was seen — a guess, remembered as one.
void Node::noteAnnounced(const SwarmPeer& peer, const ContentId& id) {
  peers_.noteClaims();
  RoundGather::Contribution c{id, {}, false};
  if (const auto held = peers_.claimsIn(peer.id, gather_->round())) {
    c.claims = *held;
  } else {
    c.claims = std::set<int>(peer.announced.claims.begin(), peer.announced.claims.end());
    c.claimsGuessed = true;
  }
  if (gather_->announced(peer.id, std::move(c)))  // already here
    QTimer::singleShot(0, this, [this, id, file = *gather_->pathOf(id)] { onContributionFetched(id, file); });
}

void Node::onContributionFetched(const ContentId& id, const std::string& path) {
  if (gather_ && gather_->fetched(id, path)) gather();
}

void Node::onFetchFailed(const ContentId& id, const std::string& reason, bool refused) {
  Q_EMIT message(QStringLiteral("Fetch failed. Content: \"%1\". Reason: \"%2\"").arg(q(id).left(16), q(reason)));
  Q_EMIT noted(QStringLiteral("fetchFailed"), {{"content", q(id)}, {"reason", q(reason)}, {"refused", refused}});
  if (agreement_.fetchFailed(id, reason, refused) || shardedFetchFailed(id, reason, refused) || !gather_) return;
  if (refused) return refuse(id, reason);
  if (gather_->failed(id)) QTimer::singleShot(500, this, [this] { gather(); });
}

// A contribution broke its limits (more files, another size): removed by the swarm layer before
// its first piece. Its announcers are banned (as for a rejected contribution) and the round stops
// waiting for them — unless the sizes may be our fault (RoundGather::refused says which).
void Node::refuse(const ContentId& id, const std::string& reason) {
  const auto refusal = gather_->refused(id);
  switch (refusal.kind) {
    case RoundGather::Refusal::NotOurs:
      return;
    case RoundGather::Refusal::Retry:
      return void(QTimer::singleShot(500, this, [this] { gather(); }));
    case RoundGather::Refusal::Guessed:
      Q_EMIT message(QStringLiteral("Not merging the contribution of %1 to round %2: %3, and its claims of that "
                                    "round are unknown here (its record has moved on)")
                         .arg(q(*refusal.senders.begin()).left(16))
                         .arg(gather_->round())
                         .arg(q(reason)));
      break;
    case RoundGather::Refusal::Liars:
      for (const auto& sender : refusal.senders) {
        recorder_.refused(gather_->round(), sender, id, "refused before download: " + reason);
        banSender(sender, "refused before download: " + reason);
      }
      break;
  }
  gather();
}

// Excluded peers back in step (PeerBook::liftInStep says why) are waited for again.
void Node::liftInStepExclusions() {
  const auto ours = own_.fingerprintOf(own_.mergedRound);
  if (!ours || !gather_) return;
  for (const auto& peer : peers_.liftInStep(gather_->round(), own_.mergedRound, *ours)) {
    Q_EMIT message(QStringLiteral("Peer %1 merged round %2 into our state: waiting for its contributions again")
                       .arg(q(peer).left(16))
                       .arg(own_.mergedRound));
    Q_EMIT noted(QStringLiteral("waitedForAgain"), {{"peer", q(peer)}, {"round", qint64(own_.mergedRound)}});
  }
}

// A contribution that is on its way is waited for (up to the maximum): closing without it would
// make us merge a different set than the peers that received it. On its way = bytes arrived since
// the last look; a stalled transfer (its peer cut off) must not hold the round for the maximum
// (seen on the netlab: 10 minutes after a 60 s partition). Cut off (we heard from fewer than half
// of the others all gather long): merging what we hold alone only makes a state nobody else has
// (the netlab's 200 s cut: each cut peer merged two rounds alone and needed a snapshot after); we
// wait, up to the maximum, and once the link is back the round closes on the set the others
// merged (Agreement::swarmSetFor). Both waits are for peers whose work we merged (issue 37 item
// 5): a fresh key's trickle, or fresh claimers staying silent, held every round to the maximum.
// Until we merged anyone's work (a run's first round, a newcomer's) nobody can be told apart, and
// every peer counts as before. (Not "no expected peer has merged work": when the peers with work
// left, fresh keys alone held an honest peer's every round to the maximum as "cut off".)
void Node::onDeadline() {
  if (!gather_) return closeRound(true);
  const auto heard = [this](const PeerId& id) { return peers_.heardSinceMerge(id); };
  const bool anyWork = peers_.anyMergedWork(swarm_.selfId());
  const qint64 r = gather_->round();
  const auto mayHold = [&](const PeerId& id) { return !anyWork || peers_.mayHold(id, r); };
  const auto counts = [&](const PeerId& id) { return !anyWork || peers_.hasMergedWork(id); };
  if (gather_->elapsedSeconds() < config_.policy.deadlineMaxSeconds &&
      (gather_->fetchesProgressing(mayHold) || gather_->cutOff(heard, counts))) {
    deadline_.start(static_cast<int>(config_.policy.deadlineMinSeconds * 1000 / 2));
    return;
  }
  closeRound(true);
}

void Node::closeRound(bool deadline, const std::set<ContentId>* only, bool withoutFreshKeys) {
  if (!gather_ || gather_->closing()) return;
  deadline_.stop();
  const double seconds = gather_->elapsedSeconds();
  roundTimes_.close(deadline || withoutFreshKeys, gather_->own().seconds + seconds);
  const qint64 r = gather_->round();
  if (deadline) {
    const int arrived = static_cast<int>(gather_->arrived().size());
    const int expected = static_cast<int>(gather_->expected().size());
    Q_EMIT message(QStringLiteral("Round %1 closed by its deadline after %2 s with %3 of %4 contributions")
                       .arg(r)
                       .arg(seconds, 0, 'f', 1)
                       .arg(arrived)
                       .arg(expected));
    Q_EMIT noted(QStringLiteral("deadline"),
                 {{"round", r}, {"seconds", seconds}, {"arrived", arrived}, {"expected", expected}});
  }
  countNoShows();
  peers_.noteHeldOver(gather_->heldOver(), r);
  const auto own = own_.contrib.find(r);
  const auto list = gather_->close(deadline, own == own_.contrib.end() ? ContentId() : own->second, only);
  nextClaims_ = plannedClaims(r + 1);
  if (gather_->own().topology && gather_->own().topology->sharded) return closeSharded(list);
  QMetaObject::invokeMethod(
      worker_, [w = worker_, r, list, claims = nextClaims_] { w->merge(r, list, claims); }, Qt::QueuedConnection);
}

// At round close: who sent nothing (PeerBook counts it; kNoShowRounds in a row and it is not waited
// for, nor counted as an owner, until one arrives again).
void Node::countNoShows() {
  const auto attendance = gather_->attendance();
  std::set<PeerId> arrived;
  for (const auto& [sender, c] : gather_->arrived()) arrived.insert(sender);
  for (const auto& sender : peers_.countNoShows(arrived, attendance.serving, attendance.missing)) {
    Q_EMIT message(QStringLiteral("Peer %1 announced contributions that never began to arrive %2 rounds in a row; "
                                  "not waiting for it (nor counting it as an owner) until one does")
                       .arg(q(sender).left(16))
                       .arg(kNoShowRounds));
    Q_EMIT noted(QStringLiteral("noShow"), {{"peer", q(sender)}, {"rounds", kNoShowRounds}});
  }
  liftInStepExclusions();
}

}  // namespace es::node
