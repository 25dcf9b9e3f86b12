// RoPE's rotation of one row of a head (issue 41): LibTorch's composite — two narrows, four
// multiplies, an add, a subtract and a cat, and autograd's backward through each — made about
// eight passes over q and k a layer; this is one, forward and backward (the backward is the same
// rotation by −θ). Plain C++, compiled for several CPUs (vector_math.h).
#pragma once

#include <cstdint>

namespace es::model {

// out[i] = x[i]·c[i] − x[h+i]·s·σ[i], out[h+i] = x[i]·s·σ[i] + x[h+i]·c[i] for i < h = `half`,
// with σ = `sign` (+1 forward, −1 for the backward's transpose).
void ropeRow(const float* x, const float* cos, const float* sin, float sign, float* out, std::int64_t half);

}  // namespace es::model
