// Shape of the MoE transformer. Plain data: it travels inside run manifests and checkpoints as
// JSON, so every peer of a run builds the identical model.
#pragma once

#include "core/common/expected.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace es::model {

struct ModelConfig {
  int vocabSize = 4096;
  int dModel = 256;
  int nLayers = 4;
  int nHeads = 4;
  int nExperts = 8;
  int topK = 2;
  int expertHidden = 512;  // SwiGLU hidden width of one expert
  int seqLen = 256;        // longest context (RoPE tables are built for it)
  double ropeTheta = 10000.0;
  double normEps = 1e-5;

  int headDim() const { return dModel / nHeads; }

  // Empty when the shape is usable, else what is wrong with it.
  std::string validate() const;

  // Parameter counts, for memory planning and FLOP estimates.
  std::int64_t expertParameters() const;  // one expert in one layer (w1, w3, w2)
  std::int64_t totalParameters() const;
  std::int64_t activeParametersPerToken() const;  // shared + top-k experts, excl. embeddings

  // {"vocab_size":..,"d_model":..,"n_layers":..,"n_heads":..,"n_experts":..,"top_k":..,
  //  "expert_hidden":..,"seq_len":..,"rope_theta":..,"norm_eps":..}
  std::string toJson() const;
  // Strict: unknown keys and bad values are errors. Missing keys keep their defaults.
  static Expected<ModelConfig> fromJson(std::string_view json);

  bool operator==(const ModelConfig& other) const;
  bool operator!=(const ModelConfig& other) const { return !(*this == other); }
};

}  // namespace es::model
