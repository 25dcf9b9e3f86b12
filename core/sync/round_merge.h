// One round's merge, as every peer computes it: the one function that both the client
// (SpesPeer::merge, core/node) and the simulated swarm (core/sim) run, so what the benches
// measure is what the client does (issue 13, item 2). docs/ARCHITECTURE.md, "Merge rule".
//
//   contributions (any order) ─ sort by sender ─ stale check ─ checkContribution each ─ judgeRound ─┐
//   owners = the accepted senders' claims ─ experts cut to the round's scale (expert_bound.h) ─
//   aggregateStream, weighted by the work ledger ─
//   [outer step] ─ warm-up ─ ledger + 1 round for the accepted ─ fingerprint
//
// It streams (issue 14 item 3): each contribution is read from its source when a pass needs it
// and dropped before the next is read — one pass to validate, then aggregateStream's (merge.h) —
// so its peak memory does not grow with the number of contributions.
//
// Pure: LibTorch and the standard library; no files, no Qt, no networking.
#pragma once

#include "core/common/expected.h"
#include "core/model/model_config.h"
#include "core/sync/contribution_header.h"
#include "core/sync/delta_source.h"
#include "core/sync/merge.h"
#include "core/sync/outer_step.h"
#include "core/sync/validate.h"
#include "core/sync/work_ledger.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace es::sync {

// One contribution of the round that arrived.
struct RoundEntry {
  ContributionHeader header;  // as the file says (header.sender is the sender)
  DeltaSource deltas;         // its decoded deltas, read once per pass (a content error: rejected; ours: lost)
  std::set<int> claims;       // the experts the sender's signed record claimed for this round
};

struct RoundPolicy {
  AggregatePolicy aggregate;
  std::optional<WarmupConfig> warmup;  // SPES's expert-merging warm-up; nullopt: none
  OuterRule outer;                     // the outer step on the aggregate (default: plain, SPES's merge)
  ValidationPolicy validation;
};

struct EntryVerdict {
  std::string sender;
  bool accepted = false;
  bool stale = false;     // this round of this run, built on another base: skipped, no ban
  std::string staleBase;  // that base, when stale
  std::string reason;     // empty when accepted
  bool noWork = false;    // rejected as no work (validate.h): not merged, not banned
  bool lost = false;      // our disk failed to read it (Error::local): not judged, not banned
  // Out of a sharded round by a shard's reducers (shard_refusals.h): banned only by a peer that
  // checked those bytes itself.
  bool outByShards = false;
  // Accepted ones: the cosine of its shared delta with the merged shared update, and whether that
  // earned it the round in the work ledger (work_credit.h).
  double agreement = 0.0;
  bool credited = false;
};

struct RoundMerge {
  NamedTensors merged;                 // the new base, in `base`'s order
  std::vector<EntryVerdict> verdicts;  // one per entry, in sender order
  std::vector<std::string> accepted;   // the senders merged, in sender order
  Ownership owners;                    // expert → accepted senders that claimed it
  NamedTensors momentum;               // the outer rule's new momentum (empty for a plain rule)
  double alpha = 0;                    // warm-up factor applied (0: none)
  std::vector<std::string> credited;   // the accepted senders whose work agreed with the merge
  WorkLedger ledger;                   // the ledger after this round: the credited senders + 1 round
  // (sender, expert) → the factor its move was cut by (expert_bound.h); empty when none was.
  std::map<std::pair<std::string, int>, double> expertCuts;
  std::string fingerprint;  // swarmFingerprint(merged, momentum, ledger)
};

// Merges `entries` onto `base` for the round in `context`; `mergeStep` is the training step the
// merge happens at (the warm-up's alpha depends on it). The same inputs in any order give the
// bit-identical result. An error for caller mistakes (two entries of one sender) and for a source
// that read once but fails on a later pass (its file changed under the merge). `momentum`: the
// outer rule's momentum that came with `base` (empty: zeros). `ledger`: the work ledger that came
// with `base` (work_ledger.h): each accepted sender weighs ledger.weightOf(sender) in every mean.
// τ's floor for a round on `base` (ValidationPolicy::clipFloorFraction × the ceiling's lr sum ×
// √(shared elements)): 0 without a ceiling. mergeRound raises AggregatePolicy::clipTauFloor to it;
// a reducer of one shard passes it on (shard_reduce.h takes the shard's share).
double clipTauFloor(const NamedTensors& base, const ValidationPolicy& policy);

Expected<RoundMerge> mergeRound(const NamedTensors& base, const RoundContext& context, std::vector<RoundEntry> entries,
                                const RoundPolicy& policy, std::int64_t mergeStep, const model::ModelConfig& model,
                                const NamedTensors& momentum = {}, const WorkLedger& ledger = {});

// The round's last steps once `out.merged` holds the aggregate and `out.credited` the credit, as
// every way of merging takes them (mergeRound, sharded_merge.h's applyMergedShards): the outer step
// on `momentum`, the merging warm-up at `mergeStep`, the ledger + 1 round for the credited, the
// fingerprint. Throws what LibTorch throws on a caller's mistake (the callers turn it into an error).
void finishRound(const NamedTensors& base, const RoundContext& context, const RoundPolicy& policy,
                 std::int64_t mergeStep, const model::ModelConfig& model, const NamedTensors& momentum,
                 const WorkLedger& ledger, RoundMerge& out);

}  // namespace es::sync
