// RoundGather: the round's map of senders and their contributions (issue 15, item 3: a peer that
// announces and never serves must not hold rounds). Its transfers: round_gather_fetch.cpp.
#include "core/node/round_gather.h"

#include "core/node/node_util.h"

#include <QRandomGenerator>

#include <algorithm>

namespace es::node {

using detail::isSafeId;
using detail::q;

RoundGather::RoundGather(Swarm& swarm, RunFolder& folder, const NodeLog& log, RoundTrained own, const PeerId& self,
                         SizesOf sizesOf, Deadline deadline)
    : swarm_(swarm),
      folder_(folder),
      log_(log),
      own_(std::move(own)),
      self_(self),
      sizesOf_(std::move(sizesOf)),
      deadline_(deadline),
      fetchOrderSecret_(QRandomGenerator::system()->generate64()) {
  clock_.start();
}

std::set<PeerId> RoundGather::sendersOf(const ContentId& id) const {
  std::set<PeerId> senders;
  for (const auto& [sender, c] : contributions_)
    if (c.content == id) senders.insert(sender);
  return senders;
}

bool RoundGather::names(const PeerId& sender, const ContentId& id) const {
  const auto it = contributions_.find(sender);
  return it != contributions_.end() && it->second.content == id;
}

bool RoundGather::complete(const std::set<PeerId>& onAnotherBase, const PeerTest& waitedFor) const {
  for (const auto& id : expected_)
    if ((!arrived_.count(id) || onAnotherBase.count(id)) && !givenUp_.count(id) && waitedFor(id)) return false;
  return true;
}

bool RoundGather::announced(const PeerId& sender, Contribution c) {
  if (!isSafeId(c.content)) log_.say(QStringLiteral("Ignoring a malformed content id from %1").arg(q(sender).left(16)));
  const ContentId id = c.content;
  contributions_[sender] = std::move(c);
  const auto t = transfers_.find(id);
  return t != transfers_.end() && !t->second.path.empty();
}

void RoundGather::supersede(const PeerId& sender, const ContentId& current) {
  const auto it = contributions_.find(sender);
  if (it == contributions_.end() || it->second.content == current) return;
  const ContentId id = it->second.content;
  arrived_.erase(sender);
  contributions_.erase(it);
  if (named(id)) return;  // another announcer still waits for those bytes
  transfers_.erase(id);
  swarm_.retire(id, true);
}

bool RoundGather::fetched(const ContentId& id, const std::string& path) {
  const auto t = transfers_.find(id);
  if (t == transfers_.end()) return false;
  t->second.inFlight = false;
  t->second.path = path;
  for (const auto& [sender, c] : contributions_)
    if (c.content == id) arrived_[sender] = {sender, path, c.claims};
  return true;
}

std::map<PeerId, ContentId> RoundGather::contentOf() const {
  std::map<PeerId, ContentId> out;
  for (const auto& [sender, c] : contributions_) out[sender] = c.content;
  return out;
}

std::optional<std::string> RoundGather::pathOf(const ContentId& id) const {
  const auto t = transfers_.find(id);
  if (t == transfers_.end() || t->second.path.empty()) return std::nullopt;
  return t->second.path;
}

// Every live peer announces at least once a round (its contribution), so a round that by our
// deadline heard from fewer than half of the others since our last merge is a cut link, not slow
// peers (a peer cut in mid-round heard them announce it: it closes that round at the deadline
// and waits in the next). Peers that announce and never serve are heard (they do not hold the
// round: fetchesProgressing); two peers cannot tell a dead partner from a cut link, so a pair
// closes at the deadline as before. Only the peers `counts` are counted (Node::onDeadline: work
// we merged): fresh claimers silent through their grace rounds held every round to the maximum.
bool RoundGather::cutOff(const PeerTest& heardSinceMerge, const PeerTest& counts) {
  std::size_t others = 0, heard = 0;
  for (const auto& id : expected_) {
    if (id == self_ || !counts(id)) continue;
    ++others;
    if (heardSinceMerge(id) || arrived_.count(id)) ++heard;
  }
  if (others < 2 || 2 * heard >= others) return false;
  if (!cutOffSaid_) {
    cutOffSaid_ = true;
    log_.say(QStringLiteral("Round %1: heard from %2 of %3 peers since our last merge; cut off from the swarm? "
                            "Waiting for them (up to %4 s) instead of merging alone")
                 .arg(round())
                 .arg(heard)
                 .arg(others)
                 .arg(deadline_.maxSeconds));
    log_.note(QStringLiteral("cutOff"), {{"round", qint64(round())}, {"heard", int(heard)}, {"others", int(others)}});
  }
  return true;
}

std::set<PeerId> RoundGather::heldOver() const {
  std::set<PeerId> out;
  for (const auto& sender : heldBy_)
    if (!arrived_.count(sender)) out.insert(sender);
  return out;
}

// A sender whose announced contribution was fetched and sent us not one byte is missing; one
// whose contribution arrived, or at least began to (a slow honest uplink is waited for to the
// deadline), is serving. A trickle is not a no-show, but the deadline does not wait for it
// (fetchesProgressing). Held back by our quota or K: neither.
RoundGather::Attendance RoundGather::attendance() const {
  std::map<ContentId, std::int64_t> done;
  for (const auto& t : swarm_.traffic().transfers) done[t.contentId] = t.doneBytes;
  Attendance out;
  for (const auto& [sender, c] : contributions_) {
    if (sender == self_ || arrived_.count(sender)) continue;
    const bool started = transfers_.count(c.content) > 0;
    if (started && done[c.content] > 0)
      out.serving.insert(sender);
    else if (started || !isSafeId(c.content))
      out.missing.insert(sender);
  }
  return out;
}

std::vector<IncomingContribution> RoundGather::close(bool deadline, const ContentId& ownContent,
                                                     const std::set<ContentId>* only) {
  closing_ = true;
  gatherSeconds_ = elapsedSeconds();
  deadlineHit_ = deadline;
  contributions_[self_] = {ownContent, arrived_[self_].claims, false};
  transfers_[ownContent].path = own_.contribution.path;
  std::vector<IncomingContribution> list;
  mergedClaims_.clear();
  for (const auto& [sender, c] : arrived_) {
    const auto entry = contributions_.find(sender);
    const ContentId content = entry == contributions_.end() ? ContentId() : entry->second.content;
    if (only && !only->count(content)) continue;
    list.push_back(c);
    mergedClaims_[sender] = c.claims;
  }
  return list;
}

void RoundGather::retireUnarrived() {
  for (const auto& [id, t] : transfers_)
    if (t.path.empty()) swarm_.retire(id, true);
}

}  // namespace es::node
