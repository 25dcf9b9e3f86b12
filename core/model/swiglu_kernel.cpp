#include "core/model/swiglu_kernel.h"

#include "core/model/vector_math.h"

namespace es::model {
namespace {

inline float sigmoid(float x) { return 1.0f / (1.0f + vmath::exp(-x)); }

}  // namespace

ES_CPU_CLONES void swigluForward(const float* a, const float* b, float* h, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) h[i] = a[i] * sigmoid(a[i]) * b[i];
}

ES_CPU_CLONES void swigluBackward(const float* a, const float* b, const float* g, float* ga, float* gb,
                                  std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float s = sigmoid(a[i]);
    const float silu = a[i] * s;
    ga[i] = g[i] * b[i] * (s + silu * (1.0f - s));
    gb[i] = g[i] * silu;
  }
}

}  // namespace es::model
