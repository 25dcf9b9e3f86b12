// After a round's merge (Node::onMerged): its summary, the verdicts' bans, the ledger's rows, the
// agreement and out-of-step checks, old content retired, then on to the next round.
#include "core/node/node.h"
#include "core/node/node_util.h"
#include "core/node/rules/merged_set.h"

#include <algorithm>
#include <map>
#include <set>

namespace es::node {

using detail::expertList;
using detail::joinInts;
using detail::q;

// The round is merged: its summary, verdicts, what the ledger will record, the agreement check,
// then on to the next round. Each step is one function (below).
void Node::onMerged(const RoundMerged& merged) {
  const RoundSummary s = summarize(merged);
  for (const auto& v : merged.result.verdicts)
    if (!v.accepted && !v.stale && !v.lost && !v.noWork && v.sender != swarm_.selfId() &&
        (!v.outByShards || refusedHere(v.sender)))
      banSender(v.sender, v.reason);
  reportExpertCuts(s.round, merged.result);
  reportUncredited(s.round, merged.result);
  reportTopology(s.round + 1, merged.nextTopology.get());
  recorder_.merged(captureForLedger(s, merged.step));  // committed once its state is durable
  peers_.noteAccepted(s.round, merged.result.verdicts);
  noteMergedSet(merged.result);
  own_.mergedRound = s.round;
  own_.noteFingerprint(s.round, s.fingerprint);
  if (!merged.snapshotPath.isEmpty()) publishSnapshot(s.round, merged.snapshotPath);
  resyncIfOutOfStep(merged.result);
  countStale(merged.result);
  finishSharded();
  if (gather_) {
    gather_->retireUnarrived();
    agreement_.keepClosed(std::move(*gather_));  // a repair merges from it again
    gather_.reset();
  }
  retireOldContent(s.round);
  folder_.clean(false, own_.mergedRound, agreement_.pendingSnapshot());
  advanceRound(s);
}

// An accepted contribution whose expert moved over the round's bound was merged cut to it
// (sync/expert_bound.h): not a ban — honest training can move an expert far now and then — but
// the user should see whose, and how far.
void Node::reportExpertCuts(qint64 round, const MergeResult& result) {
  for (const auto& v : result.verdicts)
    for (const auto& [expert, factor] : v.expertCuts) {
      Q_EMIT message(QStringLiteral("Round %1: expert %2 of %3 moved %4 x the round's bound; merged cut to it")
                         .arg(round)
                         .arg(expert)
                         .arg(q(v.sender.str()).left(16))
                         .arg(1.0 / factor, 0, 'f', 1));
      Q_EMIT noted(QStringLiteral("expertCut"),
                   {{"round", round}, {"sender", q(v.sender.str())}, {"expert", expert}, {"factor", factor}});
    }
}

// Issue 38's switch: how the next round is reduced, told the first time and whenever it flips
// (the trainer derives it from the merged ledger at every merge: it follows the swarm both ways).
void Node::reportTopology(qint64 round, const sync::RoundTopology* next) {
  if (!next || reportedSharded_ == next->sharded) return;
  reportedSharded_ = next->sharded;
  Q_EMIT message(QStringLiteral("Round %1 is reduced %2").arg(round).arg(q(next->why)));
  Q_EMIT noted(QStringLiteral("topology"), {{"round", round}, {"sharded", next->sharded}, {"why", q(next->why)}});
}

// An accepted contribution that did not point along the merged update was merged but earned no
// standing (sync/work_credit.h): told, since an honest peer that never earns any would want to know.
void Node::reportUncredited(qint64 round, const MergeResult& result) {
  for (const auto& v : result.verdicts) {
    if (!v.accepted || v.credited) continue;
    Q_EMIT message(QStringLiteral("Round %1: the update of %2 did not agree with the merge (cosine %3): merged, no "
                                  "standing earned")
                       .arg(round)
                       .arg(q(v.sender.str()).left(16))
                       .arg(v.agreement, 0, 'g', 3));
    Q_EMIT noted(QStringLiteral("uncredited"),
                 {{"round", round}, {"sender", q(v.sender.str())}, {"agreement", v.agreement}});
  }
}

RoundSummary Node::summarize(const RoundMerged& merged) const {
  RoundSummary s;
  s.round = merged.result.round;
  s.peers = merged.result.accepted;
  s.valLoss = merged.result.valLoss;
  s.verdicts = merged.result.verdicts;
  s.fingerprint = merged.result.fingerprint;
  s.sharedFingerprint = merged.result.sharedFingerprint;
  s.alpha = merged.result.alpha;
  s.sample = merged.result.sample;
  s.step = merged.step;
  const auto traffic = swarm_.traffic();
  s.sessionBytesSent = traffic.bytesSent;
  s.sessionBytesReceived = traffic.bytesReceived;
  if (!gather_) return s;
  std::set<int> updated;
  for (const auto& v : merged.result.verdicts) {
    auto it = gather_->arrived().find(v.sender);
    if (v.accepted && it != gather_->arrived().end())
      updated.insert(it->second.claims.begin(), it->second.claims.end());
  }
  s.updatedExperts.assign(updated.begin(), updated.end());
  s.expected = static_cast<int>(gather_->expected().size());
  s.loss = gather_->own().meanLoss;
  s.tokensPerSecond = gather_->own().tokensPerSecond;
  s.gatherSeconds = gather_->gatherSeconds();
  s.deadlineHit = gather_->deadlineHit();
  return s;
}

// What the ledger records of the round: the claims and content ids that held for *that* round
// (round_recorder.h says why they are taken now).
UnrecordedRound Node::captureForLedger(const RoundSummary& s, qint64 step) const {
  const StepReport& last = trainerSteps_.last();
  UnrecordedRound u{s, step, {}, {}, last.loss, last.lr, last.step == step ? last.gpu : std::nullopt};
  u.claimsOf[swarm_.selfId()] = own_.claims;  // still this round's: advanceRound changes them after
  if (!gather_) return u;
  u.contentOf = gather_->contentOf();
  for (const auto& [sender, claims] : gather_->mergedClaims())
    if (sender != swarm_.selfId()) u.claimsOf[sender].assign(claims.begin(), claims.end());
  return u;
}

// The digest of the set we merged, for our record (merged_set.h: a peer out of step finds it).
void Node::noteMergedSet(const MergeResult& result) {
  if (!gather_) return;
  const auto contentOf = gather_->contentOf();
  std::set<ContentId> accepted;
  for (const auto& v : result.verdicts)
    if (auto id = contentOf.find(v.sender); v.accepted && id != contentOf.end()) accepted.insert(id->second);
  own_.noteSetDigest(result.round, mergedSetDigest(accepted));
}

// Most others built on a base we do not hold: we merged a different set of contributions (a
// deadline hit us but not them). Take the majority's snapshot instead of drifting apart. "Most"
// by weight (standing.h): contributions naming a base of their own from fresh keys do not
// outweigh the peers we merged with, so a stale flood does not push us into resyncs.
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
  const Standing& standing = peers_.standing();
  if (stale.empty() || totalWeight(standing, stale) <= totalWeight(standing, accepted) || tie) return;
  Q_EMIT message(QStringLiteral("Out of step: %1 of %2 contributions of round %3 were built on another base; resyncing")
                     .arg(stale.size())
                     .arg(stale.size() + accepted.size())
                     .arg(result.round));
  Q_EMIT noted(QStringLiteral("outOfStep"), {{"by", "bases"},
                                             {"round", qint64(result.round)},
                                             {"stale", int(stale.size())},
                                             {"contributions", int(stale.size() + accepted.size())}});
  // Two or more others agree on a state we do not hold: they are the swarm, we are the odd one
  // out, and their snapshot is what we wait for (never "keep ours as the reference").
  agreement_.wantResync(largestStaleGroup >= 2);
  agreement_.tryResync();
}

// Out of step ourselves, we judge nobody (PeerBook::countStale says what a streak costs).
void Node::countStale(const MergeResult& result) {
  if (agreement_.outOfStep()) return;
  for (const auto& sender : peers_.countStale(result.verdicts, swarm_.selfId())) {
    Q_EMIT message(QStringLiteral("Peer %1 built on another base than the swarm's %2 rounds in a row; not waiting "
                                  "for it (nor counting it as an owner) until one of its contributions is merged")
                       .arg(q(sender).left(16))
                       .arg(kStaleRounds));
    Q_EMIT noted(QStringLiteral("stale"), {{"peer", q(sender)}, {"rounds", kStaleRounds}});
  }
}

// Keep our last two contributions seeding for late fetchers; older ones are retired. Others'
// contributions likewise (RunFolder), so incoming/ holds at most three rounds.
void Node::retireOldContent(qint64 mergedRound) {
  for (auto it = own_.contrib.begin(); it != own_.contrib.end() && it->first + 2 <= mergedRound;) {
    swarm_.retire(it->second, true);
    it = own_.contrib.erase(it);
  }
  // A sharded round's outputs (ours and those fetched) go one round sooner than contributions:
  // a round has dozens per peer (a torrent per merged shard: at 8 peers ~16 ours, ~30 fetched),
  // and a peer that merged round r + 1 merged it with senders that had all applied r. Kept as
  // long as contributions (3 rounds' worth), the fourth round's contributions of 8 loaded
  // processes no longer came by its deadline (bench/reduction_processes: 1–4 of 8 everywhere).
  for (auto* outputs : {&ownOutputs_, &fetchedOutputs_})
    for (auto it = outputs->begin(); it != outputs->end() && it->first + 1 <= mergedRound;) {
      for (const auto& id : it->second) swarm_.retire(id, true);
      own_.outputs.erase(it->first);
      it = outputs->erase(it);
    }
  folder_.retireFetchedBefore(mergedRound);
}

void Node::advanceRound(const RoundSummary& s) {
  lastSummary_ = s;
  peers_.startHearing();
  own_.round = s.round + 1;
  if (!nextClaims_.empty() && nextClaims_ != own_.claims) {
    Q_EMIT message(QStringLiteral("Claims change for round %1: %2 -> %3")
                       .arg(own_.round)
                       .arg(joinInts(own_.claims), joinInts(nextClaims_)));
    own_.claims = nextClaims_;
    Q_EMIT noted(QStringLiteral("claims"),
                 {{"round", qint64(own_.round)}, {"experts", expertList(own_.claims)}, {"change", true}});
  }
  announce();
  agreement_.checkAgreement();  // the others may have merged this round already
  roundTimes_.merged();
  Q_EMIT roundClosed(s);
  if (config_.maxRounds > 0 && s.round >= config_.maxRounds) stop();
}

}  // namespace es::node
