// The outer step's rule (core/sync/outer_step.h applies it), without Torch: the node sizes a
// snapshot by it (core/sync/fetch_size.h) and the manifest names it (swarm.outer_step).
#pragma once

#include <optional>
#include <string>

namespace es::sync {

struct OuterRule {
  enum class On { Shared, Experts, All };  // which tensors take the outer step; the rest merge plainly
  double lr = 1.0;
  double momentum = 0.0;
  On on = On::Shared;
  bool plain() const { return lr == 1.0 && momentum == 0.0; }
};
std::optional<OuterRule::On> parseOuterOn(const std::string& name);  // "shared", "experts", "all"

// The momentum buffer's tensors are named for the tensor they belong to, under this prefix, so a
// base and its momentum can travel in one file and one fingerprint without a clash.
inline const char* const kMomentumPrefix = "outer_momentum/";

// Whether `rule` steps the tensor `name`.
bool takesOuterStep(const OuterRule& rule, const std::string& name);

}  // namespace es::sync
