// The full training state of one peer as one safetensors file: weights, AdamW moments, step,
// RNG state and data cursor. Resuming from it continues training exactly where it stopped
// (bit-identical on CPU with the same thread count).
//
// Layout: tensors "model.<name>", "adam.exp_avg.<name>", "adam.exp_avg_sq.<name>", "rng.cpu" (U8);
// metadata "format" = "expertswarm-training-state", "version" = "1", "step", "data_cursor", plus
// caller-defined entries (e.g. the model config as JSON).
#pragma once

#include "core/checkpoint/safetensors.h"

#include <cstdint>

namespace es::ckpt {

struct TrainingState {
  NamedTensors weights;   // every model tensor
  NamedTensors expAvg;    // AdamW first moments, trainable tensors only
  NamedTensors expAvgSq;  // AdamW second moments, same names as expAvg
  std::int64_t step = 0;
  std::uint64_t dataCursor = 0;
  at::Tensor rngState;  // torch CPU generator state (U8), may be undefined
  Metadata extra;       // caller-defined; keys must not collide with the reserved ones
};

Status saveTrainingState(const std::string& path, const TrainingState& state);
Expected<TrainingState> loadTrainingState(const std::string& path);

}  // namespace es::ckpt
