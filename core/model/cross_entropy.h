// The language-model loss: mean cross-entropy of [rows, vocab] logits against [rows] targets.
// Fused (core/model/cross_entropy_kernel.h) on float32 CPU logits without autocast, with every
// target in range; LibTorch's cross_entropy elsewhere — crossEntropyReference, always.
#pragma once

#include <torch/types.h>

namespace es::model {

torch::Tensor crossEntropy(const torch::Tensor& logits, const torch::Tensor& targets);
torch::Tensor crossEntropyReference(const torch::Tensor& logits, const torch::Tensor& targets);

}  // namespace es::model
