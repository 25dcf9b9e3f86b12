// The AdamW update as one pass over contiguous float32 memory: param, grad, and both moments are
// read and written once, instead of ~9 elementwise LibTorch ops each streaming the whole tensor
// (measured: 58 -> 12 ms per step at 2 threads for the default model). No Torch here, so this
// file can be compiled with -fno-math-errno (vectorised sqrt) without touching the shared
// precompiled header.
#pragma once

#include <cstdint>

namespace es::train {

struct AdamWScalars {
  float beta1, beta2, eps;
  float decayFactor;  // 1 - lr·weight_decay (1 for tensors without decay)
  float stepSize;     // lr / (1 - beta1^t)
  float invSqrtBc2;   // 1 / sqrt(1 - beta2^t)
};

// grad == nullptr means a zero gradient (an expert that received no token this step).
void adamwUpdate(float* param, const float* grad, float* expAvg, float* expAvgSq, std::int64_t n,
                 const AdamWScalars& s);

}  // namespace es::train
