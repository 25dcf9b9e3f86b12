// SwiGLU's element-wise middle, silu(a) · b, as one pass forward and one backward (issue 41:
// LibTorch's silu, multiply, and autograd's backward through both made six passes over every
// expert's [tokens, hidden] activations and kept silu(a) alive for the backward). Plain C++ on
// float arrays, compiled for AVX-512, AVX2 and the x86-64 baseline (GCC target_clones).
#pragma once

#include <cstdint>

namespace es::model {

// h[i] = a[i] · σ(a[i]) · b[i], σ(x) = 1 / (1 + e^−x).
void swigluForward(const float* a, const float* b, float* h, std::int64_t n);

// ga[i] = g · b · σ(a)(1 + a(1 − σ(a))), gb[i] = g · a · σ(a).
void swigluBackward(const float* a, const float* b, const float* g, float* ga, float* gb, std::int64_t n);

}  // namespace es::model
