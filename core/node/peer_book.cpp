#include "core/node/peer_book.h"

#include "core/node/node_reports.h"
#include "core/node/rules/peer_rules.h"
#include "core/store/ledger.h"

#include <QDateTime>

#include <algorithm>

namespace es::node {

namespace {
std::int64_t nowMs() { return QDateTime::currentMSecsSinceEpoch(); }
}  // namespace

PeerBook::PeerBook(const Swarm& swarm, store::Ledger* ledger, int leaseRounds, std::set<PeerId> anchors)
    : swarm_(swarm), ledger_(ledger), leaseRounds_(leaseRounds), anchors_(std::move(anchors)) {
  anchorStanding(standing_, anchors_);
}

Expected<std::size_t> PeerBook::load() {
  if (!ledger_) return std::size_t{0};
  auto bans = loadBans(ledger_->path(), swarm_.runId(), nowMs());
  if (!bans) return makeError("Cannot load the run's bans: " + bans.error());
  banned_.insert(bans->begin(), bans->end());
  auto standing = loadStanding(ledger_->path(), swarm_.runId());
  if (!standing) return makeError("Cannot load the peers' standing: " + standing.error());
  standing_ = std::move(*standing);
  anchorStanding(standing_, anchors_);
  return bans->size();
}

void PeerBook::noteClaims() {
  std::set<PeerId> present;
  for (const auto& p : swarm_.peers()) {
    roundClaims_.note(p.id, p.announced.round, p.announced.claims);
    present.insert(p.id);
  }
  roundClaims_.keepOnly(present);
}

void PeerBook::noteRecords() {
  noteClaims();
  const auto peers = swarm_.peers();
  noteHeard(peers);
  if (!ledger_) return;
  // Only what changed, at most once a minute per peer (peer_sightings.h).
  const auto now = nowMs();
  sightings_.begin();
  for (const auto& p : peers)
    if (sightings_.due(p.id, p.seq, now)) ledger_->seePeer(swarm_.runId(), p.id.str(), p.publicKey, now);
  sightings_.end();
}

void PeerBook::noteHeard(const std::vector<SwarmPeer>& peers) {
  std::map<PeerId, std::int64_t> seen;  // only peers with a record now: bounded by the record book
  std::map<PeerId, std::int64_t> joining;
  const auto now = nowMs();
  for (const auto& p : peers) {
    seen[p.id] = p.seq;
    if (auto last = lastSeq_.find(p.id); last == lastSeq_.end() || last->second != p.seq) heard_.insert(p.id);
    if (!p.announced.claims.empty()) continue;
    const auto since = joiningSince_.find(p.id);
    joining[p.id] = since == joiningSince_.end() ? now : since->second;
  }
  lastSeq_ = std::move(seen);
  joiningSince_ = std::move(joining);
}

std::vector<PeerId> PeerBook::joiningPeers(std::int64_t windowMs) const {
  std::vector<PeerId> out;
  const auto now = nowMs();
  for (const auto& [peer, since] : joiningSince_)
    if (now - since < windowMs && !isBanned(peer)) out.push_back(peer);
  return out;
}

// "Heard since our last merge" counts record changes after it: changes made before it but not
// yet noted (noteHeard runs on record events) are noted now, not in the next round (under load
// tst_node_rounds' cut-off peer counted the others' pre-merge records as heard and merged alone).
void PeerBook::startHearing() {
  noteHeard(swarm_.peers());
  heard_.clear();
}

void PeerBook::ban(const PeerId& id, const std::string& reason) {
  banned_[id] = {nowMs(), reason};
  if (ledger_) ledger_->banPeer(swarm_.runId(), id.str(), reason);
}

bool PeerBook::isBanned(const PeerId& id) const {
  auto it = banned_.find(id);
  return it != banned_.end() && banInForce(it->second, nowMs());
}

// A vote on the state `round` was merged into weighs each voter by the work we merged *before*
// that round. Counting the round itself tilts a split in it: in a split three ways each peer had
// merged one partner's contribution in the round, so its own state and that partner's outweighed
// the third and each peer picked another winner (tst_node_rounds
// aSplitThreeWaysComesBackToOneState). Peers that worked together until the split weigh the
// voters alike, so they pick alike. (A round we did not merge — a snapshot's — has no entry: the
// standing of now.)
const Standing& PeerBook::standingBefore(std::int64_t round) const {
  const auto it = standingAt_.find(round);
  return it == standingAt_.end() ? standing_ : it->second;
}

// Counted at merge time (the ledger's rows follow once the round is durable); a crash between
// the two loses at most that round's increments, as it loses the round.
void PeerBook::noteAccepted(std::int64_t round, const std::vector<ContributionVerdict>& verdicts) {
  standingAt_[round] = standing_;
  while (standingAt_.size() > 3) standingAt_.erase(standingAt_.begin());
  auto& accepted = acceptedAt_[round];
  accepted.clear();
  for (const auto& v : verdicts)
    if (v.accepted) {
      ++standing_[v.sender];
      accepted.insert(v.sender);
    }
  while (acceptedAt_.size() > 3) acceptedAt_.erase(acceptedAt_.begin());
}

bool PeerBook::acceptedIn(std::int64_t round, const PeerId& peer) const {
  const auto it = acceptedAt_.find(round);
  return it != acceptedAt_.end() && it->second.count(peer);
}

std::optional<std::set<int>> PeerBook::claimsIn(const PeerId& peer, std::int64_t round) const {
  return roundClaims_.of(peer, round);
}

std::vector<SwarmPeer> PeerBook::livePeers(std::int64_t round, bool withExcluded) const {
  auto live = livePeersOf(swarm_.peers(), round, leaseRounds_, banned_, nowMs(), claimingSince_);
  if (withExcluded) return live;
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

bool PeerBook::anyMergedWork(const PeerId& self) const {
  for (const auto& [peer, rounds] : standing_)
    if (peer != self && rounds > 0 && !anchors_.count(peer)) return true;
  return false;
}

bool PeerBook::mayHold(const PeerId& peer, std::int64_t round) const {
  const auto held = heldOver_.find(peer);
  return hasMergedWork(peer) && (held == heldOver_.end() || round - held->second > kHeldOverRounds);
}

void PeerBook::noteHeldOver(const std::set<PeerId>& senders, std::int64_t round) {
  for (const auto& sender : senders) heldOver_[sender] = round;
  if (heldOver_.size() > 4096) heldOver_.clear();  // bounded: a flood of keys forgets, never blocks
}

std::vector<PeerId> PeerBook::countNoShows(const std::set<PeerId>& arrived, const std::set<PeerId>& serving,
                                           const std::set<PeerId>& missing) {
  for (const auto& sender : arrived) noShows_.erase(sender);
  for (const auto& sender : serving) noShows_.erase(sender);
  std::vector<PeerId> out;
  for (const auto& sender : missing)
    if (!serving.count(sender) && ++noShows_[sender] == kNoShowRounds) out.push_back(sender);
  return out;
}

// A no-show (or a peer stale kStaleRounds in a row) stays out until one of its contributions
// arrives (is merged) before we close — which a peer that fell behind (a partition, a snapshot to
// fetch, a round trained again) never manages while nobody waits for it: the netlab's cut peers,
// back in step after a 200 s cut, stayed out for good. So such a peer whose record says it merged
// the very state we merged last is waited for again (to the normal deadline, as any live peer),
// at most once every kNoShowLiftRounds rounds (a liar copying our fingerprint and never serving is
// waited for, to the normal deadline, in at most two rounds of four). A no-show's count starts
// again; a stale peer's streak does not: it is waited for in the round of the lift only
// (livePeers: on probation), and stays out of the claims plan until one of its contributions is
// merged — a sender that copies our fingerprint into its record and names another base in every
// contribution would otherwise win its experts back, to leave them un-updated, with every lift
// (tst_fetch_limits aStalePeerCopyingOurStateDoesNotWinItsExpertsBack).
std::vector<PeerId> PeerBook::liftInStep(std::int64_t round, std::int64_t mergedRound, const std::string& ours) {
  std::vector<PeerId> lifted;
  for (const auto& p : swarm_.peers()) {
    const auto noShow = noShows_.find(p.id);
    const bool excluded = (noShow != noShows_.end() && noShow->second >= kNoShowRounds) || staleOut(p.id);
    const auto merged = p.announced.merged.find(mergedRound);
    if (!excluded || merged == p.announced.merged.end() || merged->second != ours) continue;
    if (auto last = noShowLifted_.find(p.id); last != noShowLifted_.end() && round - last->second < kNoShowLiftRounds)
      continue;
    noShowLifted_[p.id] = round;
    if (noShow != noShows_.end()) noShows_.erase(noShow);
    lifted.push_back(p.id);
  }
  if (noShows_.size() > 4096) noShows_.clear();  // bounded: only live peers' counts matter
  if (noShowLifted_.size() > 4096) noShowLifted_.clear();
  return lifted;
}

// Issue 15, item 1: a contribution on another base is stale — skipped, never a ban (a deadline
// can split honest peers). But a peer whose contributions are stale kStaleRounds rounds in a
// row while we hold the swarm's state is not catching up: it is not waited for nor counted as an
// owner until one of its contributions is merged. (Out of step ourselves, the node asks nothing.)
bool PeerBook::staleOut(const PeerId& peer) const {
  const auto stale = staleStreak_.find(peer);
  return stale != staleStreak_.end() && stale->second >= kStaleRounds;
}

std::vector<PeerId> PeerBook::countStale(const std::vector<ContributionVerdict>& verdicts, const PeerId& self) {
  std::vector<PeerId> out;
  for (const auto& v : verdicts) {
    if (v.sender == self) continue;
    if (v.accepted) staleStreak_.erase(v.sender);
    if (v.stale && ++staleStreak_[v.sender] == kStaleRounds) out.push_back(v.sender);
  }
  if (staleStreak_.size() > 4096) staleStreak_.clear();  // bounded: only live peers' counts matter
  return out;
}

}  // namespace es::node
