// The weighted low median the merge's robust rules share (robust_aggregate.cpp: centered
// clipping's τ; expert_bound.cpp: the reference expert move): the smallest value whose weight,
// with that of all smaller values, is at least half the total. With every weight 1 it is the low
// median (the lower middle value: one outlier never raises it, not even among two); weighted by
// the work ledger, keys without merged work cannot drag it (issue 37). Pure C++.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

namespace es::sync {

// (value, weight ≥ 0) pairs with a positive total weight; the caller ensures both.
inline double weightedLowMedian(std::vector<std::pair<double, double>> valueWeight) {
  std::sort(valueWeight.begin(), valueWeight.end());
  double total = 0.0;
  for (const auto& [value, weight] : valueWeight) total += weight;
  double below = 0.0;
  for (const auto& [value, weight] : valueWeight) {
    below += weight;
    if (2.0 * below >= total) return value;
  }
  return valueWeight.back().first;
}

}  // namespace es::sync
