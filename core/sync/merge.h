// SPES merge math, as pure functions over named tensors (docs/ARCHITECTURE.md, "Swarm protocol",
// Merge rule).
//
// A contribution holds the sender's *deltas* against the round's base state (the previous merged
// state): every shared tensor plus the tensors of the experts it claims. The merge is
//   shared tensor        base + mean over all contributions of their delta
//   expert (l, e) tensor base + mean over the contributions of e's owners (replicas), or base
//                        unchanged when no owner's contribution arrived
// each mean weighted by the senders' merged rounds (SenderDeltas::weight, work_ledger.h), or by
// head count where none of its senders has any; and it is deterministic: contributions are combined in sender order,
// never arrival order. No Qt, no networking: LibTorch + the standard library only.
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/common/expected.h"
#include "core/model/model_config.h"
#include "core/sync/delta_source.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace es::sync {

using ckpt::NamedTensors;

struct Contribution {
  std::string sender;   // peer id; unique within a round
  NamedTensors deltas;  // decoded float32 deltas against the round's base
};

// expert index (the same index in every layer) -> the peers that own it this round.
using Ownership = std::map<int, std::set<std::string>>;

// How shared tensors are combined (run.json swarm.aggregate; the run's default is centered_clip,
// train::SwarmPolicy; this struct's default stays the plain mean, SPES's own rule, which the
// simulator and its tests use unless told otherwise). Experts always take the owners' mean:
// an expert's owners are few (often one) and named by signed claims, so there is no honest
// majority among them to be robust with.
enum class SharedRule { Mean, CenteredClip };
struct AggregatePolicy {
  SharedRule shared = SharedRule::Mean;
  int clipIterations = 3;      // the paper starts at the previous momentum and needs ~1; from the
                               // base (v = 0) the first only reaches ~(n−2f)/n of the honest mean
  double clipTauFactor = 1.0;  // τ = this × the low median of the contributions' distances
  // τ is never below this: a median counts heads, and fresh keys sending vanishing deltas pulled τ
  // to nothing, clipping every honest update away (issue 37 item 1). mergeRound sets it from the
  // run's update ceiling (round_merge.h); 0: no floor.
  double clipTauFloor = 0.0;
  // A sparse run's (swarm.compression "sparse"): each shared element is averaged over the senders
  // that sent it (SparseLoCo's scatter-mean), not over all with zeros for the rest — with top-k
  // falling on different elements per sender, the plain mean shrank each sent value ~N× (issue
  // 39: +2.1 % against int8 without it, −2.3 % with it). mergeRound applies it (scatter_mean.h).
  bool scatterMean = false;
  // Issue 38: > 0 clips per shard of at most this many elements (the shared tensors packed in name
  // order, shard_plan.h's packShards), each with its own distances and τ: what a reducer of that
  // shard alone computes, so a sharded round merges bit for bit as an all-to-all one. 0: one
  // distance over all shared tensors (the rule so far). A poisoner then holds a budget per shard
  // rather than one in all, each shard's τ following that shard's honest spread.
  std::int64_t clipShardElements = 0;
};
// "mean" / "centered_clip"; nullopt for anything else.
std::optional<SharedRule> parseSharedRule(const std::string& name);
std::string sharedRuleName(SharedRule rule);

// The merged state. `base` must hold every tensor of the model; the result has the same names in
// the same order. Deltas for names not in `base` are ignored (validate() rejects them earlier).
// Sums are formed in float64 in sender order and cast to the base dtype once, so the result is
// bit-identical for any arrival order. Two contributions from one sender, or a delta whose shape
// differs from its base tensor, are caller errors: std::invalid_argument.
// `policy` picks the shared rule; its numbers are the caller's to bound (the manifest does).
NamedTensors aggregate(const NamedTensors& base, const std::vector<Contribution>& contributions,
                       const Ownership& owners, const AggregatePolicy& policy = {});

// The same over contributions read one at a time (delta_source.h; the client's merge reads them
// from their files): one pass for the means, two per centered-clipping iteration. Peak memory is
// the base, one float64 sum per tensor (2 × the model's float32 bytes; each freed as its merged
// tensor is made), centered clipping's float64 centre and sums of the shared tensors (4 × their
// float32 bytes), the merged state, and one contribution — whatever the number of contributions.
// Bit-identical to aggregate() for the same contributions. A source's error is returned.
Expected<NamedTensors> aggregateStream(const NamedTensors& base, const std::vector<SenderDeltas>& senders,
                                       const Ownership& owners, const AggregatePolicy& policy = {});

// SPES's expert-merging warm-up. No defaults of its own (zero = off): the run's are in
// train::SwarmPolicy (merge_warmup), the one place the manifest's defaults live.
struct WarmupConfig {
  std::int64_t interval = 0;    // steps between warm-up merges
  double alpha0 = 0;            // blend factor at step 0
  std::int64_t decaySteps = 0;  // alpha reaches 0 here
  int topk = 0;                 // donors per expert (capped at n_experts - 1)
};

// alpha0 · (1 − step / decaySteps) at multiples of `interval`; 0 elsewhere and once it is ≤ 0.
double warmupAlpha(const WarmupConfig& config, std::int64_t step);

// Per layer: cosine similarity between the experts' flattened w1; for each expert its top-k most
// similar other experts (ties: lower index first) are its donors, and every tensor of the expert
// becomes base + alpha · mean over donors of (donor − base). All experts read the pre-warm-up
// weights (the update is simultaneous, so the expert order does not matter).
NamedTensors applyMergingWarmup(const NamedTensors& weights, const model::ModelConfig& config, double alpha, int topk);

}  // namespace es::sync
