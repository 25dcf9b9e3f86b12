// Centered clipping for the shared tensors (Karimireddy, He, Jaggi 2021, "Learning from History
// for Byzantine Robust Optimization"), the robust alternative to their plain mean in aggregate().
//
// Each contribution's shared deltas are treated as ONE vector x_i (all shared tensors it carries,
// concatenated conceptually). Starting from v = 0 (the base: deltas are against it), each of
// `iterations` rounds does
//   d_i = ‖x_i − v‖ over all shared tensors of contribution i
//   τ   = max(tauFactor × weighted low median of the d_i, tauFloor)
//   v  ← v + (1/W_t) Σ_i w_i · min(1, τ / d_i) · (x_{i,t} − v_t)   for every shared tensor t
// where w_i > 0 is sender i's weight (SenderDeltas::weight: its merged rounds, work_ledger.h; the
// caller leaves senders of weight 0 out, or weighs all 1 when none has merged work) and W_t the
// weight of the contributions carrying t. A contribution therefore moves v by at most
// τ·w_i/W per round however large it is, and τ follows the honest spread because the median of
// the weight does: keys without merged work neither drag τ nor outvote the centre (issue 37).
// With every weight 1 this is the paper's rule, bit for bit.
// Why the whole vector and not per tensor: a poisoner bounded per tensor can still place its full
// budget in the tensors that matter most; one distance per sender gives it one budget in all.
// Per shard (issue 38, `shards` below) is the compromise a sharded round needs: a reducer holds
// one shard, and shards are large (shared elements / peers), not single small tensors.
//
// Few contributions: one → v = x_1 exactly after the first round (it is the mean). Two → the low
// median is the smaller distance, so the farther one is pulled in to the nearer one's distance: in
// a 1-against-1 disagreement neither can move the state further than the other could alone.
// No NaN: the inputs are finite (validated), distances are finite, and τ / d_i is formed only
// when d_i > τ ≥ 0.
//
// Arithmetic (as merge.cpp): element-wise float64 torch ops (sub, mul, add, div — each correctly
// rounded, so no kernel or thread count changes a bit), contributions summed in sender order. The
// only reductions, the distances, are sequential float64 loops; each tensor's sum of squares is
// added in name order, so the distance does not depend on the order of the base's tensors either.
// Streaming (issue 14 item 3): the contributions are read one at a time (delta_source.h), twice
// per iteration — once for the distances, once for the update — so memory holds v, one float64
// sum per shared tensor and one contribution, however many contributions there are. The order of
// every float64 operation is the one a version holding all contributions would use.
#pragma once

#include "core/common/expected.h"
#include "core/sync/delta_source.h"
#include "core/sync/shard_plan.h"

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <string>
#include <vector>

namespace es::sync {

// One shared tensor to aggregate: its name and its base (for the shape).
struct SharedTensor {
  std::string name;
  const at::Tensor* base = nullptr;
};

// The aggregated delta of every shared tensor, float64 on the CPU, in `tensors`' order (zeros
// where no contribution carries it). `senders` in sender order; their tensors not in `tensors`
// are ignored. iterations ≥ 1 and tauFactor > 0 are the caller's to ensure, and a delta of
// another shape is a caller error (std::invalid_argument); a source's error is returned.
// τ = max(tauFactor × the low median, tauFloor): see AggregatePolicy::clipTauFloor.
// `shards` (issue 38): empty, one distance over all shared tensors (the rule above); else each
// shard (packShards over these tensors: whole tensors or row ranges, every element in exactly one,
// else std::invalid_argument) is clipped on its own — its own distances, its own τ, its floor
// tauFloor × √(its elements / all) — which is what a reducer holding only that shard can compute.
// One pass per iteration reads every contribution for all shards at once, as for one.
Expected<std::vector<at::Tensor>> centeredClip(const std::vector<SharedTensor>& tensors,
                                               const std::vector<SenderDeltas>& senders, int iterations,
                                               double tauFactor, double tauFloor = 0.0,
                                               const std::vector<Shard>& shards = {});

}  // namespace es::sync
