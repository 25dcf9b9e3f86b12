#include "core/train/adamw_kernel.h"

#include <cmath>

namespace es::train {

void adamwUpdate(float* param, const float* grad, float* expAvg, float* expAvgSq, std::int64_t n,
                 const AdamWScalars& s) {
  const float oneMinusB1 = 1.0f - s.beta1, oneMinusB2 = 1.0f - s.beta2;
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = grad ? grad[i] : 0.0f;
    const float m = s.beta1 * expAvg[i] + oneMinusB1 * g;
    const float v = s.beta2 * expAvgSq[i] + oneMinusB2 * g * g;
    expAvg[i] = m;
    expAvgSq[i] = v;
    param[i] = param[i] * s.decayFactor - s.stepSize * m / (std::sqrt(v) * s.invSqrtBc2 + s.eps);
  }
}

}  // namespace es::train
