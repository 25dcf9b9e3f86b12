#include "core/node/rules/first_round.h"

#include <algorithm>
#include <cmath>

namespace es::node {

int firstRoundStepsToSkip(const FirstRoundPace& pace) {
  if (pace.syncEvery > 1 && pace.mostHavePublished) return pace.syncEvery - 1;
  std::vector<double> rates;
  for (const double r : pace.tokensPerSecond)
    if (std::isfinite(r) && r > 0) rates.push_back(r);
  if (pace.syncEvery <= 1 || pace.tokensPerStep <= 0 || rates.empty() || !std::isfinite(pace.secondsSinceSwarmBegan))
    return 0;
  std::nth_element(rates.begin(), rates.begin() + std::ptrdiff_t(rates.size() / 2), rates.end());
  const double theirSecondsPerStep = double(pace.tokensPerStep) / rates[rates.size() / 2];
  const double left = double(pace.syncEvery) * theirSecondsPerStep - std::max(0.0, pace.secondsSinceSwarmBegan);
  const double ours = std::isfinite(pace.ownSecondsPerStep) && pace.ownSecondsPerStep > 0 ? pace.ownSecondsPerStep
                                                                                          : theirSecondsPerStep;
  const double steps = std::clamp(std::ceil(left / ours), 1.0, double(pace.syncEvery));
  return pace.syncEvery - int(steps);
}

}  // namespace es::node
