// Element-wise float math written so that GCC vectorises the loops that call it (the fused
// kernels: rms_norm_kernel.cpp, swiglu_kernel.cpp, cross_entropy_kernel.cpp). glibc's expf is a call per element GCC
// will not vectorise without -ffast-math; LibTorch's vectorised one (Sleef) is not public API.
// Plain C++; for .cpp files built with -fno-math-errno.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

// The kernels' loops are compiled for AVX-512, AVX2 and the x86-64 baseline; the CPU picks one
// at load time (GCC function multi-versioning).
#define ES_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

namespace es::model::vmath {

// e^x to ~2 ulp, branch-free (Cephes' expf): x = n·ln2 + r with |r| ≤ ln2/2 (ln2 split in two for
// an exact product), e^r by a degree-6 polynomial, 2^n put into the exponent bits. Clamped so
// that 2^n stays a normal float: e^x for x < −87.3 is ~1e−38, not 0.
inline float exp(float x) {
  x = std::min(88.0f, std::max(-87.3365447504f, x));
  const float t = x * 1.44269504088896341f;
  const float n = float(int(t + (t >= 0 ? 0.5f : -0.5f)));
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const std::int32_t bits = (std::int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

}  // namespace es::model::vmath
