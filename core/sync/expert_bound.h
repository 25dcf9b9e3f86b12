// The bound on a sender's move of an expert that does not come from the sender (issue 37 item 4):
// each (sender, expert) moves at most kExpertRmsFactor × the round's reference expert move — the
// low median of every accepted (sender, expert) RMS, weighted by the senders' merged rounds (the
// work ledger; a sender's weight shared among the experts it claims), so fresh keys cannot pull it
// down, a sole owner is not its own reference, and claiming more experts buys no more say. A
// move over it is scaled down to it in the merge (clipped, not refused: nobody is banned for an
// expert that trained unusually far). Where no sender with merged work carries an expert (a run's
// first round) there is no reference, and the update ceiling alone bounds it.
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/sync/validate.h"

#include <map>
#include <string>
#include <vector>

namespace es::sync {

using ckpt::NamedTensors;

// An honest peer's experts moved within 1.09 × their median in rounds of the bundled run
// (tst_update_ceiling anHonestPeersExpertsMoveAlike asserts under half this); 4 leaves room for
// experts the router favours, and an attacker's expert at the ceiling (~58 × an honest one in
// bench/sybil_cost) is cut to it.
inline constexpr double kExpertRmsFactor = 4.0;

// The RMS of each expert's deltas in a checked contribution, over all its tensors (every layer's
// w1, w2, w3), from the per-tensor norms its validation took (validate.h) — or, in a sharded
// round, from its shard figures (ContributionCheck::figures: expertMovesOfFigures).
std::map<int, double> expertMoves(const ContributionCheck& check);

// Each expert's RMS from a contribution's shard figures, added in the order given (plan order):
// what a sharded round's peers compute from the figures its senders state.
std::map<int, double> expertMovesOfFigures(const std::vector<ShardFigure>& figures);

struct SenderExperts {
  double weight = 0;            // the sender's ledger weight
  std::map<int, double> moves;  // expertMoves of its contribution, claimed experts only
};

// For each sender (by index) the factor ≤ 1 each of its experts is scaled by in the merge; an
// expert that needs none is absent.
std::vector<std::map<int, double>> expertScales(const std::vector<SenderExperts>& senders,
                                                double factor = kExpertRmsFactor);

}  // namespace es::sync
