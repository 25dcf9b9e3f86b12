// Validation of a decoded contribution before it may be merged (docs/ARCHITECTURE.md, "Swarm
// protocol", Validation).
// A rejected contribution is never merged; the caller records the reason and bans the sender.
#pragma once

#include "core/sync/contribution_header.h"
#include "core/sync/merge.h"
#include "core/sync/shard_figures.h"
#include "core/sync/shard_plan.h"

#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace es::sync {

// What the receiver expects of every contribution of this round.
struct RoundContext {
  std::string run;
  std::int64_t round = 0;
  std::string baseHash;  // fingerprint of the round's base state
};

// The most an honest trainer moves one weight in a round (core/train/update_ceiling.h): the
// round's learning-rate sum × (Adam's step bound + weight decay × the tensor's largest |weight|).
// The run's manifest fixes it, so no contribution and no number of keys moves it. Decoded values
// never exceed it either: int8 scales to the largest |value| (never rounds above it), bf16 rounds
// by at most 2⁻⁸ (the slack).
struct UpdateCeiling {
  double lrSum = 0;  // 0: unknown (unit tests of the median rules, synthetic deltas)
  double adamStep = 0;
  double weightDecay = 0;
  bool known() const { return lrSum > 0 && adamStep > 0; }
  double perElement(double maxAbsWeight) const {
    return lrSum * (adamStep + weightDecay * maxAbsWeight) * (1.0 + 1.0 / 128.0);
  }
};

struct ValidationPolicy {
  // With a known ceiling it alone bounds each weight, and the medians below bound nothing: a
  // median over contributions counts heads, so fresh keys sending vanishing deltas dragged it down
  // until every honest update was an "outlier" (issue 37 item 1), and a sole expert owner was the
  // median of its own expert (item 4).
  UpdateCeiling ceiling;
  double relativeNormBound = 10.0;  // without a ceiling: an update norm may be at most this × the round's median
  double absoluteNormCap = 1e4;     // and never above this (a lone sender has no median to compare)
  // With a ceiling: a contribution whose RMS over all its deltas is below this × ceiling.lrSum did
  // no work (an honest round of the bundled run: RMS 0.11-0.20 x the lr sum, tst_update_ceiling). It is not merged, so
  // it earns no standing, and not banned (Verdict::noWork): it costs us its fetch, nothing else.
  double noWorkFraction = 1e-3;
  // With a ceiling: centered clipping's τ is never below this × ceiling.lrSum × √(shared elements)
  // (AggregatePolicy::clipTauFloor): under the shared RMS of an honest round (0.13-0.24 x the lr
  // sum in tst_update_ceiling), so fresh keys sending near-nothing clip an honest update to no
  // less than a fifth to a third of itself, and a poisoner gains no more than honest work moves.
  double clipFloorFraction = 0.05;
  // A sparse run's (issue 39): a contribution in its sparse codec may move a weight what AdamW
  // moves it in sparseWaitRounds rounds (sparse_layout.h: its error feedback held the rest back,
  // and keep·W² ≤ chunk keeps its L2 within a dense one's at `ceiling`); any other codec stays
  // at `ceiling`. 0: not a sparse run.
  UpdateCeiling sparseCeiling;
  int sparseWaitRounds = 0;
  // A sharded round's plan (issue 38; mergeRound sets it when the round clips per shard): a
  // contribution's norm, and each expert's RMS for the expert bound, then come from its shard
  // figures (shard_figures.h) added in plan order — the figures a sharded round's senders state
  // and its reducers check — so both ways of merging reach the same verdicts bit for bit. Empty:
  // from the per-tensor norms.
  std::vector<Shard> figureShards;
};

struct Verdict {
  bool accepted = false;
  std::string reason;   // empty when accepted, e.g. "norm 3.1e6 > bound 4.2e1"
  bool noWork = false;  // rejected as no work (ValidationPolicy::noWorkFraction): not the sender's ban
};

// L2 norm over every delta of the contribution.
double updateNorm(const NamedTensors& deltas);

// Checks, in order: header run / round / base hash; names ⊆ shared ∪ the sender's claimed
// experts; every name present in `base` with exactly its shape and float32 dtype; all values
// finite; norm ≤ min(relativeNormBound × medianNorm, absoluteNormCap) (medianNorm ≤ 0: absolute
// cap only).
Verdict validate(const ContributionHeader& header, const NamedTensors& deltas, const NamedTensors& base,
                 const std::set<int>& senderClaims, const RoundContext& round, double medianNorm,
                 const ValidationPolicy& policy = {});

// One contribution's checks that do not depend on the other contributions: everything but the
// norm bounds, and its norms for them. The streaming merge (round_merge.h) runs it while it holds
// that contribution alone, then judges the round from the checks.
struct ContributionCheck {
  std::string reason;                                       // non-empty: rejected already
  bool noWork = false;                                      // rejected as no work (not banned)
  double norm = 0;                                          // L2 over all its deltas
  std::vector<std::pair<std::string, double>> tensorNorms;  // per tensor, in the contribution's order
  std::vector<std::int64_t> tensorElements;                 // each tensor's element count, in that order
  std::vector<ShardFigure> figures;                         // with ValidationPolicy::figureShards: per shard
};
// Each base tensor's largest |weight| (what its ceiling per weight grows with: weight decay), taken
// once a round on first use — not once per contribution that carries the tensor.
class BaseMaxAbs {
 public:
  double of(const std::string& name, const at::Tensor& baseTensor);

 private:
  std::unordered_map<std::string, double> seen_;
};
// With a known ceiling it also holds every weight to it and a vanishing contribution to "no work".
// `maxAbs`: the round's (the caller keeps it across the round's contributions); null: taken here.
ContributionCheck checkContribution(const ContributionHeader& header, const NamedTensors& deltas,
                                    const NamedTensors& base, const std::set<int>& senderClaims,
                                    const RoundContext& round, const ValidationPolicy& policy = {},
                                    BaseMaxAbs* maxAbs = nullptr);

// The parts of the checks above that a sharded round's reducer runs on its shard's rows (shard_check.h),
// with a known ceiling; each the reason, or empty:
// - every weight of `delta` (a whole tensor, or rows of it) within what the run's optimizer moves a
//   weight of `baseTensor` in a round (UpdateCeiling; a sparse contribution in its sparse codec:
//   in its wait rounds);
std::string ceilingBreach(const std::string& name, const at::Tensor& delta, const at::Tensor& baseTensor,
                          const std::string& codec, const ValidationPolicy& policy, BaseMaxAbs& baseMaxAbs);
// - a whole contribution of this norm over these elements below the no-work floor (not banned);
std::string noWorkReason(double norm, std::int64_t elements, const ValidationPolicy& policy);
// - and above the absolute cap.
std::string normCapReason(double norm, const ValidationPolicy& policy);

// The round's verdicts, in the checks' order. With a known ceiling: the checks' own verdicts and the
// absolute cap. Without: the norm bounds below against the medians of the contributions that
// passed every other check.
std::vector<Verdict> judgeRound(const std::vector<ContributionCheck>& checks, const ValidationPolicy& policy = {});

// Validates a whole round held in memory (checkContribution for each, then judgeRound): the median is taken over the
// norms of the contributions that pass every other check. Beside the global bound, each tensor's delta norm must be ≤
// relativeNormBound × that tensor's low median over those contributions that carry it: a global
// bound alone lets a sender spend its whole budget on one small tensor (a norm weight, a router)
// where 10 × the whole update's median is a huge relative change. A tensor whose median is 0
// (nobody changed it) has no per-tensor bound; the global bound and the absolute cap still apply. It is the low median
// (the lower middle value for an even count), so a single outlier cannot raise its own bound even in a round of two.
// An expert's tensor is carried only by the expert's owners, often one or two, and an owner whose
// batches routed (next to) no tokens to the expert moves it by weight decay alone: at afd6a98 honest
// expert updates 100-500 × a co-owner's were refused and their senders banned (a newcomer, by all,
// and an honest peer, by the newcomer), which split the swarm for good. So an expert tensor's bound
// is never below relativeNormBound × the round's typical update scale at its size: the low median,
// over the contributions, of their norm per √element, × √(its elements).
// Verdicts in input order; vectors of different lengths are a caller error (std::invalid_argument).
std::vector<Verdict> validateRound(const std::vector<ContributionHeader>& headers,
                                   const std::vector<NamedTensors>& deltas, const NamedTensors& base,
                                   const std::vector<std::set<int>>& senderClaims, const RoundContext& round,
                                   const ValidationPolicy& policy = {});

// A stable, non-cryptographic fingerprint (64-bit FNV-1a, hex) of named tensors' names, dtypes,
// shapes and bytes: identifies a base state. Integrity against tampering comes from the signed
// peer record and the torrent info-hash, not from this.
std::string stateFingerprint(const NamedTensors& tensors);

}  // namespace es::sync
