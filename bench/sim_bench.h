// Shared by the simulated-swarm benchmarks (spes_quality, robust_merge_cost): their `name: value`
// output and their small model, so both measure the same model.
#pragma once

#include "core/model/model_config.h"

#include <cstdio>
#include <string>

namespace es::bench {

inline void print(const std::string& name, double value, int decimals = 4, const char* unit = "") {
  std::printf("%s: %.*f%s%s\n", name.c_str(), decimals, value, *unit ? " " : "", unit);
  std::fflush(stdout);
}

// The bundled model made ~2× faster to train (d 128, expert hidden 256, seq 128); same vocab,
// layers, experts and top-k, so the SPES structure is unchanged.
inline void useSmallModel(model::ModelConfig& model) {
  model.dModel = 128;
  model.expertHidden = 256;
  model.seqLen = 128;
}

// Smaller again (d 64, expert hidden 128, seq 64; same vocab, layers, experts and top-k) for the
// merge-rule sweeps (issue 18), which need ≥ 50 merges per run on 2 cores.
inline void useTinyModel(model::ModelConfig& model) {
  model.dModel = 64;
  model.expertHidden = 128;
  model.seqLen = 64;
}

}  // namespace es::bench
