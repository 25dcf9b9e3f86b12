// How far an honest AdamW trainer can move a weight in one round, whatever its gradients — the
// bound every contribution is held to (validate.h, UpdateCeiling). It comes from the run's
// manifest alone, so no contribution and no number of fresh keys can move it (issue 37 items 1
// and 4: the round's medians that bounded updates before were dragged to zero by Sybils sending
// vanishing deltas, and a sole expert owner was compared with itself).
//
// Adam's step per element is lr · m̂_t / (√v̂_t + ε). With ρ = β1/√β2 < 1, every past gradient
// is bounded by v: |g_{t−k}| ≤ √(v_t / ((1 − β2) β2^k)), so
//   |m̂_t| / √v̂_t ≤ (1 − β1)/√(1 − β2) · (1 − ρ^t)/(1 − ρ) · √(1 − β2^t)/(1 − β1^t),
// 1 at t = 1 and 5.84 as t → ∞ for the bundled β1 = 0.9, β2 = 0.95 (ε only makes it smaller).
// Decoupled weight decay adds lr · wd · |w|. A typical step is about lr (Kingma & Ba §2.1), so the
// ceiling is loose for honest work (tst_update_ceiling prints by how much): it bounds what a liar
// can do by what training could, it does not judge quality.
#pragma once

#include "core/sync/validate.h"
#include "core/train/run_manifest.h"

#include <cstdint>

namespace es::sync {

// sup over t ≥ 1 of the bound above; 0 when β1 ≥ √β2 (Adam's step is unbounded in theory).
double adamStepBound(double beta1, double beta2);

// Σ lr(step) for fromStep ≤ step < toStep.
double learningRateSum(const train::TrainConfig& config, std::int64_t fromStep, std::int64_t toStep);

// The ceiling of a contribution made of the steps fromStep … toStep − 1. A contribution of round r
// is the weights at r·sync_every minus the round's base: what a peer trained while the previous
// round merged is carried into it (SpesPeer::merge), so its steps are (r−1)·sync_every … r·sync_every − 1.
UpdateCeiling updateCeiling(const train::TrainConfig& config, std::int64_t fromStep, std::int64_t toStep);

}  // namespace es::sync
