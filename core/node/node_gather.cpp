// Node: gathering a round's contributions (issue 15, item 3: a peer that announces and never
// serves must not hold rounds). Every live peer's announced contribution is fetched; the round
// closes once every expected one arrived, or at its deadline. Past the deadline a contribution is
// waited for only while its bytes arrive fast enough to land before deadline.max_seconds; a
// sender whose contribution never began to arrive kNoShowRounds rounds in a row is not waited for.
#include "core/node/node.h"
#include "core/node/node_util.h"

#include <algorithm>

namespace es::node {

using detail::isSafeId;
using detail::q;

bool Node::Gather::hasContent(const ContentId& id) const {
  for (const auto& [key, claims] : fetching)
    if (key.second == id) return true;
  return false;
}

std::set<PeerId> Node::Gather::sendersOf(const ContentId& id) const {
  std::set<PeerId> senders;
  for (const auto& [key, claims] : fetching)
    if (key.second == id) senders.insert(key.first);
  return senders;
}

void Node::gather() {
  if (!gather_ || gather_->closing) return;
  const qint64 r = gather_->round;
  // As soon as a record says so, not at our next close: a peer back in step after a partition
  // is waited for in the round it rejoins (the netlab's cut peer was left out one round more).
  liftInStepExclusions();
  gather_->expected = {swarm_.selfId()};
  for (const auto& p : livePeers(r)) gather_->expected.insert(p.id);
  // No-shows are fetched from all the same (not waited for): one that delivers is back at once.
  std::set<PeerId> onAnotherBase;
  for (const auto& p : livePeers(r, true)) {
    if (builtOnAnotherState(p)) onAnotherBase.insert(p.id);
    auto c = p.announced.contrib.find(r);
    if (c == p.announced.contrib.end()) {
      // Withdrawn: built on a state its sender left (forgetContributionsAfter); the rewrite follows.
      dropSuperseded(p.id, ContentId());
      continue;
    }
    if (announcesOurOwn(p.id, c->second)) continue;
    dropSuperseded(p.id, c->second);
    if (gather_->arrived.count(p.id)) continue;
    if (!gather_->fetching.count({p.id, c->second})) noteAnnounced(p, c->second);
    const ContentId& id = c->second;
    if (isSafeId(id) && !gather_->transfers.count(id) && !gather_->fetchedPath.count(id))
      startFetch(id, r);  // or later: at most kMaxConcurrentFetches at once, within the quota
  }
  if (closeOnSwarmSet()) return;
  for (const auto& id : gather_->expected)
    if ((!gather_->arrived.count(id) || onAnotherBase.count(id)) && !gather_->givenUp.count(id)) return;
  closeRound(false);
}

// A sender whose record names another state for the round before than ours trained on that state:
// what it sent is stale. If it is out of step it repairs or resyncs and sends the round again
// (dropSuperseded takes the new one), so its slot is not filled yet — closing on the stale one
// merged the round without it while it merged its rewrite: a split again, every round
// (tst_node_rounds aSplitThreeWaysComesBackToOneState). Still only until the deadline.
bool Node::builtOnAnotherState(const SwarmPeer& sender) const {
  const auto ours = fingerprints_.find(gather_->round - 1);
  const auto theirs = sender.announced.merged.find(gather_->round - 1);
  return ours != fingerprints_.end() && theirs != sender.announced.merged.end() && theirs->second != ours->second;
}

// A contribution names its sender in its header, so no other peer's can have our content id: a
// peer announcing one of ours as its own is an impostor. Fetching it would make us download (and at
// the round's close retire, i.e. stop seeding) our own contribution, and nobody would get it.
bool Node::announcesOurOwn(const PeerId& sender, const ContentId& id) {
  for (const auto& [round, own] : contrib_) {
    if (own != id) continue;
    banSender(sender, "announced our own contribution of round " + std::to_string(round) + " as its own");
    return true;
  }
  return false;
}

// Every record's (round, claims), kept per peer for the rounds a contribution may still arrive in.
void Node::noteRoundClaims() {
  std::set<PeerId> present;
  for (const auto& p : swarm_.peers()) {
    roundClaims_.note(p.id, p.announced.round, p.announced.claims);
    present.insert(p.id);
  }
  roundClaims_.keepOnly(present);
}

// `peer` names `id` as its contribution of the round: it is owed those bytes' verdict.
// The claims it held in the round (core/node/rules/round_claims.h); its record's current ones only when
// no record of that round was seen — a guess, remembered as one.
void Node::noteAnnounced(const SwarmPeer& peer, const ContentId& id) {
  if (!isSafeId(id)) Q_EMIT message(QStringLiteral("Ignoring a malformed content id from %1").arg(q(peer.id).left(16)));
  noteRoundClaims();
  if (const auto held = roundClaims_.of(peer.id, gather_->round)) {
    gather_->fetching[{peer.id, id}] = *held;
    gather_->claimsGuessed.erase(peer.id);
  } else {
    gather_->fetching[{peer.id, id}] = std::set<int>(peer.announced.claims.begin(), peer.announced.claims.end());
    gather_->claimsGuessed.insert(peer.id);
  }
  if (auto path = gather_->fetchedPath.find(id); path != gather_->fetchedPath.end())  // already here
    QTimer::singleShot(0, this, [this, id, file = path->second] { onContributionFetched(id, file); });
}

// A peer that resynced mid-round trains the round again on the swarm's base and announces a new
// contribution for it: the one it announced last is the one to merge (the first is stale).
void Node::dropSuperseded(const PeerId& sender, const ContentId& current) {
  for (auto it = gather_->fetching.begin(); it != gather_->fetching.end();) {
    const auto [who, id] = it->first;
    if (who != sender || id == current) {
      ++it;
      continue;
    }
    gather_->arrived.erase(sender);
    it = gather_->fetching.erase(it);
    if (gather_->hasContent(id)) continue;  // another announcer still waits for those bytes
    gather_->inFlight.erase(id);
    gather_->transfers.erase(id);
    swarm_.retire(id, true);
  }
}

// The bytes of `contentId` are here: a contribution of every sender that announced it (one
// transfer serves all; validation keeps the one the file names).
void Node::onContributionFetched(const ContentId& id, const std::string& path) {
  if (!gather_ || !gather_->transfers.count(id)) return;
  gather_->inFlight.erase(id);
  gather_->fetchedPath[id] = path;
  for (const auto& [key, claims] : gather_->fetching)
    if (key.second == id) gather_->arrived[key.first] = {key.first, path, claims};
  gather();
}

// The exact sizes the content may have: those of every sender that announced it this round (an
// impostor's claims must not make the real sender's file look wrong and get it banned).
FetchLimits Node::limitsFor(const ContentId& id, qint64 round) const {
  FetchLimits all;
  for (const auto& [key, claims] : gather_->fetching) {
    if (key.second != id) continue;
    const auto limits = contributionLimits(key.first, claims, round);
    all.sizes.insert(all.sizes.end(), limits.sizes.begin(), limits.sizes.end());
  }
  std::sort(all.sizes.begin(), all.sizes.end());
  all.sizes.erase(std::unique(all.sizes.begin(), all.sizes.end()), all.sizes.end());
  return all;
}

// Waiting on past the deadline is worth it only for a transfer that will finish in time: bytes
// came since the last look, and at that rate the rest lands before deadline.max_seconds. A
// contribution announced but never served (no bytes) or served at a trickle (an attacker holding
// the round to its maximum, one byte a look) is not waited for. A transfer younger than one
// re-arm (half the minimum) is given that look to begin: a late sender's contribution, announced
// just before the deadline, is still connecting (tst_swarm_newcomer: closing on it at once left
// the newcomer's contributions out of every round).
bool Node::fetchesProgressing() {
  std::map<ContentId, std::pair<std::int64_t, std::int64_t>> done;  // content → (bytes done, total once known)
  for (const auto& t : swarm_.traffic().transfers) done[t.contentId] = {t.doneBytes, t.totalBytes};
  const qint64 nowMs = gather_->clock.elapsed();
  const double leftSeconds = config_.policy.deadlineMaxSeconds - nowMs / 1000.0;
  const qint64 graceMs = static_cast<qint64>(config_.policy.deadlineMinSeconds * 1000 / 2);
  bool progressing = false;
  for (const auto& [id, most] : gather_->inFlight) {
    auto& p = gather_->progress[id];
    const auto [bytes, total] = done.count(id) ? done[id] : std::pair<std::int64_t, std::int64_t>{0, 0};
    const std::int64_t size = total > 0 ? std::min(total, most) : most;  // the metadata's size, once known
    const double seconds = std::max<qint64>(nowMs - p.atMs, 1) / 1000.0;
    const double rate = (bytes - p.bytes) / seconds;  // bytes per second since the last look
    const bool young = nowMs - p.startedMs < graceMs;
    if (young || (rate > 0 && (size - bytes) / rate <= leftSeconds)) progressing = true;
    p.bytes = bytes;
    p.atMs = nowMs;
  }
  return progressing;
}

void Node::noteHeard() {
  std::map<PeerId, std::int64_t> seen;  // only peers with a record now: bounded by the record book
  for (const auto& p : swarm_.peers()) {
    seen[p.id] = p.seq;
    if (auto last = lastSeq_.find(p.id); last == lastSeq_.end() || last->second != p.seq) heardThisRound_.insert(p.id);
  }
  lastSeq_ = std::move(seen);
}

// Every live peer announces at least once a round (its contribution), so a round that by our
// deadline heard from fewer than half of the others since our last merge is a cut link, not slow
// peers (a peer cut in mid-round heard them announce it: it closes that round at the deadline
// and waits in the next). Peers
// that announce and never serve are heard (they do not hold the round: fetchesProgressing); two
// peers cannot tell a dead partner from a cut link, so a pair closes at the deadline as before.
bool Node::cutOff() {
  std::size_t others = 0, heard = 0;
  for (const auto& id : gather_->expected) {
    if (id == swarm_.selfId()) continue;
    ++others;
    if (heardThisRound_.count(id) || gather_->arrived.count(id)) ++heard;
  }
  if (others < 2 || 2 * heard >= others) return false;
  if (!gather_->cutOffSaid) {
    gather_->cutOffSaid = true;
    Q_EMIT message(
        QStringLiteral(
            "Round %1: heard from %2 of %3 peers since our last merge; cut off from the swarm? Waiting for them "
            "(up to %4 s) instead of merging alone")
            .arg(gather_->round)
            .arg(heard)
            .arg(others)
            .arg(config_.policy.deadlineMaxSeconds));
  }
  return true;
}

// At round close: a sender whose announced contribution was fetched and sent us not one byte is
// one round nearer to not being waited for; one whose contribution arrived, or at least began to
// (a slow honest uplink is waited for to the deadline, as before), starts again from zero. A
// trickle is not a no-show, but the deadline does not wait for it (fetchesProgressing).
void Node::countNoShows() {
  std::map<ContentId, std::int64_t> done;
  for (const auto& t : swarm_.traffic().transfers) done[t.contentId] = t.doneBytes;
  std::set<PeerId> missing, serving;  // missing: its transfer started (not held back by our quota or K)
  for (const auto& [key, claims] : gather_->fetching) {
    const auto& [sender, id] = key;
    if (sender == swarm_.selfId() || gather_->arrived.count(sender)) continue;
    const bool started = gather_->transfers.count(id) > 0;
    if (started && done[id] > 0)
      serving.insert(sender);
    else if (started || !isSafeId(id))
      missing.insert(sender);
  }
  for (const auto& [sender, c] : gather_->arrived) noShows_.erase(sender);
  for (const auto& sender : serving) noShows_.erase(sender);
  for (const auto& sender : missing) {
    if (serving.count(sender) || ++noShows_[sender] != kNoShowRounds) continue;
    Q_EMIT message(QStringLiteral("Peer %1 announced contributions that never began to arrive %2 rounds in a row; not "
                                  "waiting for it (nor counting it as an owner) until one does")
                       .arg(q(sender).left(16))
                       .arg(kNoShowRounds));
  }
  liftInStepExclusions();
  if (noShows_.size() > 4096) noShows_.clear();  // bounded: only live peers' counts matter
  if (noShowLifted_.size() > 4096) noShowLifted_.clear();
}

// A no-show (or a peer stale kStaleRounds in a row) stays out until one of its contributions
// arrives (is merged) before we close — which a peer that fell behind (a partition, a snapshot to
// fetch, a round trained again) never manages while nobody waits for it: the netlab's cut peers,
// back in step after a 200 s cut, stayed out for good. So such a peer whose record says it merged
// the very state we merged last is waited for again (to the normal deadline, as any live peer),
// at most once every kNoShowLiftRounds rounds (a liar copying our fingerprint and never serving is
// waited for, to the normal deadline, in at most two rounds of four). Looked at whenever we gather
// (a record arrived) and at each close. A no-show's count starts again; a stale peer's streak does
// not: it is waited for in the round of the lift only (livePeers: on probation), and stays out of
// the claims plan until one of its contributions is merged — a sender that copies our fingerprint
// into its record and names another base in every contribution would otherwise win its experts
// back, to leave them un-updated, with every lift (tst_fetch_limits
// aStalePeerCopyingOurStateDoesNotWinItsExpertsBack).
void Node::liftInStepExclusions() {
  const auto ours = fingerprints_.find(mergedRound_);
  if (ours == fingerprints_.end() || !gather_) return;
  const qint64 r = gather_->round;
  for (const auto& p : swarm_.peers()) {
    const auto noShow = noShows_.find(p.id);
    const bool excluded = (noShow != noShows_.end() && noShow->second >= kNoShowRounds) || staleOut(p.id);
    const auto merged = p.announced.merged.find(mergedRound_);
    if (!excluded || merged == p.announced.merged.end() || merged->second != ours->second) continue;
    if (auto lifted = noShowLifted_.find(p.id); lifted != noShowLifted_.end() && r - lifted->second < kNoShowLiftRounds)
      continue;
    noShowLifted_[p.id] = r;
    if (noShow != noShows_.end()) noShows_.erase(noShow);
    Q_EMIT message(QStringLiteral("Peer %1 merged round %2 into our state: waiting for its contributions again")
                       .arg(q(p.id).left(16))
                       .arg(mergedRound_));
  }
}

// Issue 15, item 1: a contribution on another base is stale — skipped, never a ban (a deadline
// can split honest peers). But a peer whose contributions are stale kStaleRounds rounds in a
// row while we hold the swarm's state (resyncIfOutOfStep left us in step) is not catching up:
// it is not waited for nor counted as an owner until one of its contributions is merged. Out of
// step ourselves, we judge nobody.
bool Node::staleOut(const PeerId& peer) const {
  const auto stale = staleStreak_.find(peer);
  return stale != staleStreak_.end() && stale->second >= kStaleRounds;
}

void Node::countStale(const MergeResult& result) {
  if (resyncWanted_) return;
  for (const auto& v : result.verdicts) {
    if (v.sender == swarm_.selfId()) continue;
    if (v.accepted) staleStreak_.erase(v.sender);
    if (!v.stale || ++staleStreak_[v.sender] != kStaleRounds) continue;
    Q_EMIT message(QStringLiteral("Peer %1 built on another base than the swarm's %2 rounds in a row; not waiting for "
                                  "it (nor counting it as an owner) until one of its contributions is merged")
                       .arg(q(v.sender).left(16))
                       .arg(kStaleRounds));
  }
  if (staleStreak_.size() > 4096) staleStreak_.clear();  // bounded: only live peers' counts matter
}

}  // namespace es::node
