// Issue 38: a sharded round's merge, as production code — what a reducer does for one shard and
// what every peer does with the merged shards (docs/ARCHITECTURE.md, "Sharded reduction", protocol
// steps 3, 5 and 6). Together they are mergeRound's bits for the same contributions when the round
// clips per shard (AggregatePolicy::clipShardElements = the plan's shard size; tst_sharded_round).
//
//   every peer:  senders' signed figures ─ shardedScale: who is out whole, owners, expert cuts
//   a reducer:   its shard's files ─ reduceRoundShard: checks, reduce, credit part ─ MergedShard
//   every peer:  every shard's MergedShard (a pass that refused nobody) ─ applyMergedShards:
//                place, credit in plan order, ledger, outer step, warm-up, fingerprint
//
// Which senders a shard refused reaches the others through node/rules/shard_refusals.h (a second
// pass without them). Pure: LibTorch and the standard library; files come through a reader.
#pragma once

#include "core/sync/merged_shard_file.h"
#include "core/sync/round_merge.h"
#include "core/sync/shard_figures.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace es::sync {

// A sender of the round as every reducer knows it: from its record and its figures file.
struct ShardedSender {
  ContributionHeader header;         // header.sender is its id
  std::set<int> claims;              // its record's claims for the round
  std::vector<ShardFigure> figures;  // its signed figures (loadShardFigures), plan order
};

// What every peer computes alike from the figures before a shard's byte is read.
struct ShardedScale {
  std::vector<std::string> accepted;                         // sorted: the order of every credit part
  std::map<std::string, Verdict> refused;                    // refused whole by the figures (judgeFigures)
  Ownership owners;                                          // expert → accepted senders claiming it
  std::map<std::pair<std::string, int>, double> expertCuts;  // as RoundMerge's
};

// Of `senders` but those in `out` (a pass's refusals): judgeFigures each; the accepted ones'
// owners and, with a known ceiling, the expert bound's cuts from their figures and ledger weights.
ShardedScale shardedScale(const std::vector<ShardedSender>& senders, const std::set<std::string>& out,
                          const WorkLedger& ledger, const ValidationPolicy& policy);

// A sender's file of a shard as rows (loadContributionShard, then piecesAsRows), or why not — the
// sender's fault: a reducer that cannot read it refuses it.
using ShardRowsReader = std::function<Expected<NamedTensors>(const ShardedSender& sender, const Shard& shard)>;

// One reducer's output for `shard`: every accepted sender that carries it is read and checked
// (checkShardRows against its signed figure and the ceiling: one that fails is refused here and
// left out), the rest reduced (reduceShard, the ledger's weights, the cuts, the clip over this
// shard), and for a shared shard the credit part of every accepted sender (sorted). `key` names it.
Expected<MergedShard> reduceRoundShard(const Shard& shard, const NamedTensors& base,
                                       const std::vector<ShardedSender>& senders, const ShardedScale& scale,
                                       const WorkLedger& ledger, const RoundPolicy& policy, const MergedShardKey& key,
                                       const ShardRowsReader& read, BaseMaxAbs& maxAbs);

// Every peer's new state from one merged shard per shard of `plan` (in plan order, of one pass
// that refused nobody): the shards placed on `base`, the credit parts added in plan order, the
// ledger, the outer step, the warm-up at `mergeStep`, the fingerprint — RoundMerge's fields, its
// verdicts only the accepted senders' (their credit's cosine; the refusals are the passes'). An
// error when a shard is missing, refused someone, or its senders are not the accepted ones — or
// moves a weight past the run's ceiling (the larger of the dense and a sparse run's): every mean
// and centered clip of contributions within the ceiling stays within it, so such rows are the
// reducers' lie, and colluders that all publish one wrong shard can move it no further than an
// honest round does.
Expected<RoundMerge> applyMergedShards(const NamedTensors& base, const RoundContext& context,
                                       const std::vector<Shard>& plan, const std::vector<MergedShard>& merged,
                                       const ShardedScale& scale, const RoundPolicy& policy, std::int64_t mergeStep,
                                       const model::ModelConfig& model, const NamedTensors& momentum,
                                       const WorkLedger& ledger);

}  // namespace es::sync
