#include "core/sync/robust_aggregate.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace es::sync {
namespace {

// Sequential float64 sum of squares of a float64 tensor (see the header's arithmetic note).
double sumOfSquares(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  const double* p = c.data_ptr<double>();
  double sum = 0.0;
  for (std::int64_t i = 0, n = c.numel(); i < n; ++i) sum += p[i] * p[i];
  return sum;
}

// x − v in float64, on the CPU (v lives there).
at::Tensor diff(const at::Tensor& x, const at::Tensor& v) { return x.detach().to(at::kCPU, at::kDouble) - v; }

// ‖x_i − v‖ over all shared tensors of each contribution; `byName` fixes the order in which the
// tensors' sums of squares are added. Contributions carrying no shared tensor get −1.
std::vector<double> distances(const std::vector<SharedDeltas>& tensors, const std::vector<at::Tensor>& v,
                              const std::vector<std::size_t>& byName, std::size_t contributions) {
  std::vector<double> squares(contributions, 0.0);
  std::vector<bool> carries(contributions, false);
  for (const std::size_t t : byName) {
    for (const auto& [index, delta] : tensors[t].deltas) {
      squares[index] += sumOfSquares(diff(*delta, v[t]));
      carries[index] = true;
    }
  }
  std::vector<double> out(contributions, -1.0);
  for (std::size_t i = 0; i < contributions; ++i)
    if (carries[i]) out[i] = std::sqrt(squares[i]);
  return out;
}

// The low median (as validateRound's: one outlier never raises it, not even among two).
double lowMedian(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[(values.size() - 1) / 2];
}

}  // namespace

std::vector<at::Tensor> centeredClip(const std::vector<SharedDeltas>& tensors, std::size_t contributions,
                                     int iterations, double tauFactor) {
  if (iterations < 1 || !(tauFactor > 0.0) || !std::isfinite(tauFactor))
    throw std::invalid_argument("centered clipping: iterations must be >= 1 and the tau factor > 0");
  std::vector<at::Tensor> v;
  for (const auto& t : tensors) {
    v.push_back(torch::zeros(t.base->sizes(), torch::dtype(torch::kDouble)));
    for (const auto& [index, delta] : t.deltas) {
      if (index >= contributions) throw std::invalid_argument("centered clipping: contribution index out of range");
      if (delta->sizes() != t.base->sizes())
        throw std::invalid_argument("aggregate: delta shape differs from its base tensor");
    }
  }
  std::vector<std::size_t> byName(tensors.size());
  std::iota(byName.begin(), byName.end(), std::size_t{0});
  std::stable_sort(byName.begin(), byName.end(),
                   [&](std::size_t a, std::size_t b) { return tensors[a].name < tensors[b].name; });

  for (int round = 0; round < iterations; ++round) {
    const std::vector<double> d = distances(tensors, v, byName, contributions);
    std::vector<double> present;
    for (const double x : d)
      if (x >= 0.0) present.push_back(x);
    if (present.empty()) break;  // no contribution carries a shared tensor: v stays 0
    const double tau = tauFactor * lowMedian(present);
    std::vector<double> scale(contributions, 1.0);
    for (std::size_t i = 0; i < contributions; ++i)
      if (d[i] > tau) scale[i] = tau / d[i];  // d > tau >= 0, so d > 0
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      const auto& deltas = tensors[t].deltas;
      if (deltas.empty()) continue;
      at::Tensor sum = diff(*deltas.front().second, v[t]) * scale[deltas.front().first];
      for (std::size_t k = 1; k < deltas.size(); ++k)
        sum = sum + diff(*deltas[k].second, v[t]) * scale[deltas[k].first];
      v[t] = v[t] + sum / static_cast<double>(deltas.size());
    }
  }
  return v;
}

}  // namespace es::sync
