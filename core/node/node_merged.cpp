// After a round's merge (Node::onMerged): its summary, the verdicts' bans, the ledger's rows, the
// agreement and out-of-step checks, old content retired, then on to the next round.
#include "core/node/node.h"
#include "core/node/node_util.h"

#include <algorithm>
#include <map>
#include <set>

namespace es::node {

using detail::expertList;
using detail::joinInts;

// The round is merged: its summary, verdicts, what the ledger will record, the agreement check,
// then on to the next round. Each step is one function (below, and node_record.cpp).
void Node::onMerged(const RoundMerged& merged) {
  const RoundSummary s = summarize(merged);
  for (const auto& v : merged.result.verdicts)
    if (!v.accepted && !v.stale && !v.lost && v.sender != swarm_.selfId()) banSender(v.sender, v.reason);
  unrecorded_[s.round] = captureForLedger(s, merged.step);  // committed once its state is durable
  noteStanding(s.round, merged.result);
  keepClosedRound(merged.result);
  mergedRound_ = s.round;
  noteFingerprint(s.round, s.merge.fingerprint);
  if (!merged.snapshotPath.isEmpty()) publishSnapshot(s.round, merged.snapshotPath);
  resyncIfOutOfStep(merged.result);
  countStale(merged.result);
  retireUnarrived();
  gather_.reset();
  retireOldContent(s.round);
  cleanRunFolder(false);
  advanceRound(s);
}

RoundSummary Node::summarize(const RoundMerged& merged) const {
  RoundSummary s;
  s.round = merged.result.round;
  s.peers = merged.result.accepted;
  s.valLoss = merged.result.valLoss;
  s.merge = merged.result;
  s.step = merged.step;
  if (!gather_) return s;
  std::set<int> updated;
  for (const auto& v : merged.result.verdicts) {
    auto it = gather_->arrived.find(v.sender);
    if (v.accepted && it != gather_->arrived.end()) updated.insert(it->second.claims.begin(), it->second.claims.end());
  }
  s.updatedExperts.assign(updated.begin(), updated.end());
  s.expected = static_cast<int>(gather_->expected.size());
  s.loss = gather_->own.meanLoss;
  s.tokensPerSecond = gather_->own.tokensPerSecond;
  s.gatherSeconds = gather_->gatherSecondsHint;
  s.deadlineHit = gather_->deadlineHit;
  return s;
}

// Most others built on a base we do not hold: we merged a different set of contributions (a
// deadline hit us but not them). Take the majority's snapshot instead of drifting apart. "Most"
// by weight (core/node/rules/standing.h): contributions naming a base of their own from fresh keys do
// not outweigh the peers we merged with, so a stale flood does not push us into resyncs.
void Node::resyncIfOutOfStep(const MergeResult& result) {
  std::set<PeerId> accepted, stale;
  std::map<std::string, std::set<PeerId>> staleBases;  // base hash → others that built on it
  for (const auto& v : result.verdicts) {
    if (v.sender == swarm_.selfId()) continue;
    if (v.accepted) accepted.insert(v.sender);
    if (v.stale) {
      stale.insert(v.sender);
      staleBases[v.staleBase].insert(v.sender);
    }
  }
  std::size_t largestStaleGroup = 0;
  for (const auto& [base, senders] : staleBases) largestStaleGroup = std::max(largestStaleGroup, senders.size());
  // Two peers that disagree see the same picture: only the larger id gives in.
  const bool tie = accepted.empty() && stale.size() == 1 && swarm_.selfId() < *stale.begin();
  if (stale.empty() || totalWeight(standing_, stale) <= totalWeight(standing_, accepted) || tie) return;
  Q_EMIT message(QStringLiteral("Out of step: %1 of %2 contributions of round %3 were built on another base; resyncing")
                     .arg(stale.size())
                     .arg(stale.size() + accepted.size())
                     .arg(result.round));
  resyncWanted_ = true;
  // Two or more others agree on a state we do not hold: they are the swarm, we are the odd one
  // out, and their snapshot is what we wait for (never "keep ours as the reference").
  majorityElsewhere_ = largestStaleGroup >= 2;
  tryResync();
}

// Keep our last two contributions seeding for late fetchers; older ones are retired. Others'
// contributions likewise: seeded two rounds (a peer catching up gathers them again), then removed
// with their files, so incoming/ holds at most three rounds.
void Node::retireOldContent(qint64 mergedRound) {
  for (auto it = contrib_.begin(); it != contrib_.end() && it->first + 2 <= mergedRound;) {
    swarm_.retire(it->second, true);
    it = contrib_.erase(it);
  }
  for (auto it = fetched_.begin(); it != fetched_.end() && it->first + 2 <= mergedRound;) {
    for (const auto& id : it->second) {
      swarm_.retire(id, true);
      fetchRetries_.erase(id);
    }
    it = fetched_.erase(it);
  }
}

void Node::advanceRound(const RoundSummary& s) {
  lastSummary_ = s;
  // "Heard since our last merge" counts record changes after it: changes made before it but not
  // yet noted (noteHeard runs on gather events) are noted now, not in the next round (under load
  // tst_node_rounds' cut-off peer counted the others' pre-merge records as heard and merged alone).
  noteHeard();
  heardThisRound_.clear();
  round_ = s.round + 1;
  if (!nextClaims_.empty() && nextClaims_ != claims_) {
    Q_EMIT message(QStringLiteral("Claims change for round %1: %2 -> %3")
                       .arg(round_)
                       .arg(joinInts(claims_), joinInts(nextClaims_)));
    claims_ = nextClaims_;
    Q_EMIT noted(QStringLiteral("claims"), {{"round", round_}, {"experts", expertList(claims_)}, {"change", true}});
  }
  announce();
  checkAgreement();  // the others may have merged this round already
  ++roundsClosed_;
  Q_EMIT roundClosed(s);
  if (config_.maxRounds > 0 && s.round >= config_.maxRounds) stop();
}

}  // namespace es::node
