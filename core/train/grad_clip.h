// Gradient clipping by global norm, without reading the norm back to the host: LibTorch's C++
// clip_grad_norm_ returns a double (a wait for the device in the middle of every step) and, on
// any device, launches a norm and a multiply per tensor — about 1 300 launches a step for the
// 1 B-parameter config. Here the norm stays a device tensor (the trainer reads it with the
// step's other figures at the end) and, from LibTorch 2.1, the per-tensor work is two
// multi-tensor (_foreach) calls. Same formula as torch::nn::utils::clip_grad_norm_ (norm 2).
#pragma once

#include <torch/types.h>

#include <vector>

namespace es::train {

// Scales the gradients of `params` (those that have one) by min(1, maxNorm / (norm + 1e-6)) and
// returns the total L2 norm before scaling as a 0-dim tensor on their device (undefined when no
// parameter has a gradient).
torch::Tensor clipGradNorm(const std::vector<torch::Tensor>& params, double maxNorm);

// Whether clipGradNorm uses the multi-tensor calls in this LibTorch (tests say which path they check).
bool multiTensorClipAvailable();

}  // namespace es::train
