#include "core/model/rope_kernel.h"

#include "core/model/vector_math.h"

namespace es::model {

ES_CPU_CLONES void ropeRow(const float* x, const float* cos, const float* sin, float sign, float* out,
                           std::int64_t half) {
  for (std::int64_t i = 0; i < half; ++i) {
    const float s = sign * sin[i];
    out[i] = x[i] * cos[i] - x[half + i] * s;
    out[half + i] = x[i] * s + x[half + i] * cos[i];
  }
}

}  // namespace es::model
