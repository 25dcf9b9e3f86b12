// `expertswarm sample`: text from a model with a key/value cache, deterministic for a seed
// (sampling draws from a CPU generator seeded with it, on the CPU, whatever the model's device).
#pragma once

#include "core/common/expected.h"
#include "core/model/moe_transformer.h"

#include <cstdint>
#include <vector>

namespace es::infer {

struct SampleOptions {
  int tokens = 64;           // new tokens to generate
  double temperature = 0.8;  // 0: greedy (argmax)
  int topK = 40;             // sample among the k most likely; 0: the whole vocabulary
  std::uint64_t seed = 1;
};

// The new tokens after `prompt` (not the prompt). Error: empty prompt, bad options, or prompt +
// tokens longer than the model's context (seq_len).
Expected<std::vector<std::int64_t>> generate(model::MoeTransformer& model, const std::vector<std::int64_t>& prompt,
                                             const SampleOptions& options);

struct TextLoss {
  std::int64_t tokens = 0;  // tokens predicted (all but the first of each window)
  double loss = 0;          // mean cross-entropy, nats per token
};

// Mean cross-entropy of `tokens` under `model`, over consecutive windows of seq_len + 1 tokens
// (every token but the first predicted once, with up to seq_len tokens of context). Error: fewer
// than 2 tokens.
Expected<TextLoss> textLoss(model::MoeTransformer& model, const std::vector<std::int64_t>& tokens);

}  // namespace es::infer
