// Which merged contributions earn a round in the work ledger (work_ledger.h; issue 37: weight from
// accepted work that others can check). Being merged is not enough: noise just over the no-work
// floor passes validation and is merged, and crediting it gave keys standing for nothing. A round
// is credited to a sender whose shared delta agrees with the round's merged shared update — the
// cosine between them over every shared element is above what a direction carrying no signal
// reaches: kAgreementSigmas / √D for D shared elements (a random direction's cosine with a fixed
// one has a standard deviation of 1 / √D), at most kAgreementCap. Reversed or unrelated work earns nothing; honest work
// does, for any swarm size honest peers share a signal in: an honest peer's cosine with a mean of
// N such peers is about √(ρ + (1 − ρ)/N) for a pairwise correlation ρ, ≥ 1/√N ≫ 8/√D while
// N ≪ D / 64 (D: ~3 M for the bundled model). What it cannot see: a key that echoes the swarm's
// direction (last round's update, another's contribution) is credited — it did no work, but its
// merged effect is the swarm's own direction.
//
// Every peer must credit the same senders (the ledger is fingerprinted with the weights), so the
// sums are plain sequential float64 loops in tensor-name order, as validation's norms are.
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/common/expected.h"
#include "core/sync/delta_source.h"

#include <cstdint>
#include <vector>

namespace es::sync {

inline constexpr double kAgreementSigmas = 8.0;
// The bar never rises above this cosine: in a model of few shared weights (the tests') 8 σ of
// noise would be a cosine over 1; an honest peer among a handful agrees far above it.
inline constexpr double kAgreementCap = 0.25;

struct Agreement {
  double cosine = 0.0;              // of the sender's shared delta with the merged shared update
  std::int64_t sharedElements = 0;  // D: elements of the shared tensors the cosine runs over
  bool credited() const;
};

// For each sender (in order) its agreement with the merge of `base` into `merged`; a sender that
// carries no shared tensor, or a merge that moved no shared weight, agrees 0. `shardElements` > 0:
// a sharded round's (AggregatePolicy::clipShardElements) — the sums are added shard by shard as
// its reducers add them (shardAgreement, combineAgreements), so both ways credit the same bits;
// 0: one running sum over the shared tensors in name order.
Expected<std::vector<Agreement>> agreementWithMerge(const ckpt::NamedTensors& base, const ckpt::NamedTensors& merged,
                                                    const std::vector<SenderDeltas>& senders,
                                                    std::int64_t shardElements = 0);

// Issue 38: a reducer's part of every sender's agreement, from its shared shard's rows
// (shard_reduce.h's shardRows of the base, of the merged shard and of each sender's pieces):
// the update's Σ u·u and each sender's Σ d·u and Σ d·d, added piece by piece in the shard's order.
struct ShardAgreement {
  double updateSquares = 0.0;
  std::int64_t elements = 0;
  std::vector<double> dot, squares;  // per sender, in order
};
Expected<ShardAgreement> shardAgreement(const ckpt::NamedTensors& baseRows, const ckpt::NamedTensors& mergedRows,
                                        const std::vector<SenderDeltas>& senderRows);

// The agreements of `senders` senders from every shared shard's part, added in the order given
// (the plan's).
std::vector<Agreement> combineAgreements(const std::vector<ShardAgreement>& parts, std::size_t senders);

}  // namespace es::sync
