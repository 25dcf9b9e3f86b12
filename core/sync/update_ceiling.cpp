#include "core/sync/update_ceiling.h"

#include <algorithm>
#include <cmath>

namespace es::sync {

double adamStepBound(double beta1, double beta2) {
  if (!(beta1 >= 0 && beta1 < 1 && beta2 > 0 && beta2 < 1)) return 0;
  const double rho = beta1 / std::sqrt(beta2);
  if (rho >= 1) return 0;
  const double head = (1 - beta1) / std::sqrt(1 - beta2);
  double best = 0, rhoT = 1, beta1T = 1, beta2T = 1;
  // The bound rises towards its limit; by t = 10⁴ the powers are far below double precision.
  for (int t = 1; t <= 10000; ++t) {
    rhoT *= rho;
    beta1T *= beta1;
    beta2T *= beta2;
    best = std::max(best, head * (1 - rhoT) / (1 - rho) * std::sqrt(1 - beta2T) / (1 - beta1T));
  }
  return best;
}

double learningRateSum(const train::TrainConfig& config, std::int64_t fromStep, std::int64_t toStep) {
  double sum = 0;
  for (std::int64_t step = std::max<std::int64_t>(0, fromStep); step < toStep; ++step)
    sum += train::learningRateAt(config, step);
  return sum;
}

UpdateCeiling updateCeiling(const train::TrainConfig& config, std::int64_t fromStep, std::int64_t toStep) {
  return {learningRateSum(config, fromStep, toStep), adamStepBound(config.beta1, config.beta2), config.weightDecay};
}

}  // namespace es::sync
