// The newest merged state of a run, found on disk and loaded into a model for inference
// (`expertswarm export | sample | eval`, issue 17). No Qt.
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/common/expected.h"
#include "core/model/model_config.h"
#include "core/model/moe_transformer.h"

#include <cstdint>
#include <string>

namespace es::infer {

struct MergedState {
  std::string path;            // the file the weights came from
  std::int64_t round = 0;      // the merged round (0: a local-only run's state, not merged)
  ckpt::NamedTensors weights;  // our names (tensor_names.h)
};

// The newest complete round of <runDir>/swarm-state (base.safetensors; a damaged round falls back
// to the one before, as on resume), else the local-only state <runDir>/state/training-state.safetensors.
// Error when the run has neither: it has not trained yet.
Expected<MergedState> loadNewestState(const std::string& runDir);

// A model of `config` holding `weights` (every tensor, exact shapes), in eval mode on `device`
// ("cpu", "cuda", "cuda:N", or "auto": a GPU when there is one; checked by train::checkDevice).
Expected<model::MoeTransformer> buildModel(const model::ModelConfig& config, const ckpt::NamedTensors& weights,
                                           const std::string& device = "cpu");

}  // namespace es::infer
