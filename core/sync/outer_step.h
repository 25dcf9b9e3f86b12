// DiLoCo's outer optimizer on a round's merged delta (issue 18; Douillard et al. 2023): the merge
// gives every peer the same Δ = merged − base, and an outer Nesterov step moves the base by it:
//   m ← μ·m + Δ          new = base + lr·(Δ + μ·m)
// lr = 1, μ = 0 is the plain merge (SPES). The momentum m is a pure function of the merged deltas,
// so every peer that merged the same rounds holds the same m; it is part of the swarm's state
// (fingerprinted, persisted, in snapshots: docs/ARCHITECTURE.md, "Merge rule").
//
// Pure: LibTorch and the standard library. The rule itself (no Torch): core/sync/outer_rule.h.
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/sync/outer_rule.h"

namespace es::sync {

using NamedTensors = ckpt::NamedTensors;

struct OuterStepResult {
  NamedTensors merged;    // in `base`'s order
  NamedTensors momentum;  // one per stepped tensor, named kMomentumPrefix + name, in `base`'s order
};
// `momentum` as a previous call returned it; empty = zeros (the first round, or a plain run).
// Computed in float64 and stored as float32, in one fixed order: bit-identical on every peer.
// Throws std::invalid_argument when merged, base or momentum do not match (a caller error).
OuterStepResult applyOuterStep(const NamedTensors& base, NamedTensors merged, const NamedTensors& momentum,
                               const OuterRule& rule);

// The zero momentum of `base` under `rule` (what a run starts with).
NamedTensors zeroMomentum(const NamedTensors& base, const OuterRule& rule);

// base followed by momentum: what the swarm's fingerprint and snapshots cover.
NamedTensors withMomentum(const NamedTensors& base, const NamedTensors& momentum);

}  // namespace es::sync
