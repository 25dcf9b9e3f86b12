// Issue 38, design item 3: a reducer's merge of one shard. It holds the shard's rows of the base
// and each sender's pieces of the shard (shard_file.h), and runs the round's aggregate on them —
// the shared tensors by the round's rule with centered clipping over this shard alone (the rule a
// sharded round merges by: AggregatePolicy::clipShardElements) and, in a sparse run, the
// scatter-mean's scaling first (as mergeRound does), the experts by their owners' mean
// — weighted as the whole merge weighs (the work ledger's SenderDeltas::weight, the expert bound's
// SenderDeltas::expertScale, both from the agreed state and the round's verdicts). Placed back
// into the state, every shard's result is the whole aggregate bit for bit (tst_shard_reduce).
//
// Names: a shard holds at most one piece of any tensor (shard_plan.h cuts a tensor only between
// shards), so the reducer's tensors keep their plain names, shaped [rows, last dim].
#pragma once

#include "core/common/expected.h"
#include "core/sync/merge.h"
#include "core/sync/shard_plan.h"

#include <cstdint>
#include <vector>

namespace es::sync {

// The shard's rows of `tensors` (whole tensors by plain name; views, no copy), in plan order; a
// tensor of the shard missing from `tensors` is left out (another owner's expert).
NamedTensors shardRows(const NamedTensors& tensors, const Shard& shard);

// The shard's merge. `base`: shardRows of the round's base (every piece); `senders`: every
// sender the whole merge would take, in any order, each reading its shardRows (empty where it
// carries none of the shard); `policy`: the round's, with clipShardElements the plan's shard size
// (> 0 for a shared shard; ignored for an expert's); `sharedElements`: all shared elements of the
// model (τ's floor is this shard's share of the round's). The merged rows, in `base`'s order.
Expected<NamedTensors> reduceShard(const Shard& shard, const NamedTensors& base,
                                   const std::vector<SenderDeltas>& senders, const Ownership& owners,
                                   AggregatePolicy policy, std::int64_t sharedElements);

// Writes merged rows (reduceShard's) into `state` (whole tensors, same dtype), in place.
Status placeShard(const Shard& shard, const NamedTensors& merged, NamedTensors& state);

}  // namespace es::sync
