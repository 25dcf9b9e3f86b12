#include "core/sync/robust_aggregate.h"

#include "core/sync/weighted_median.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

namespace es::sync {
namespace {

using ckpt::NamedTensors;

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

// Which shared tensors a contribution carries, as (slot, delta) in name order: the order the
// distance adds their sums of squares in, so it does not depend on the file's tensor order.
class Carried {
 public:
  explicit Carried(const std::vector<SharedTensor>& tensors) : tensors_(tensors) {
    std::vector<std::size_t> byName(tensors.size());
    std::iota(byName.begin(), byName.end(), std::size_t{0});
    std::stable_sort(byName.begin(), byName.end(),
                     [&](std::size_t a, std::size_t b) { return tensors[a].name < tensors[b].name; });
    rank_.resize(tensors.size());
    for (std::size_t r = 0; r < byName.size(); ++r) rank_[byName[r]] = r;
    for (std::size_t t = 0; t < tensors.size(); ++t) slot_.emplace(tensors[t].name, t);
  }

  std::vector<std::pair<std::size_t, const at::Tensor*>> of(const NamedTensors& deltas) const {
    std::vector<std::pair<std::size_t, const at::Tensor*>> out;
    std::vector<bool> seen(tensors_.size(), false);
    for (const auto& [name, delta] : deltas) {
      const auto it = slot_.find(name);
      if (it == slot_.end() || seen[it->second]) continue;  // not shared, or a repeat: the first counts
      seen[it->second] = true;
      if (delta.sizes() != tensors_[it->second].base->sizes())
        throw std::invalid_argument("aggregate: delta shape differs from its base tensor");
      out.emplace_back(it->second, &delta);
    }
    std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return rank_[a.first] < rank_[b.first]; });
    return out;
  }

 private:
  const std::vector<SharedTensor>& tensors_;
  std::unordered_map<std::string, std::size_t> slot_;
  std::vector<std::size_t> rank_;
};

// ‖x_i − v‖ over the shared tensors of each contribution (−1: it carries none).
Expected<std::vector<double>> distances(const Carried& carried, const std::vector<SenderDeltas>& senders,
                                        const std::vector<at::Tensor>& v) {
  std::vector<double> out(senders.size(), -1.0);
  auto pass = forEachSender(senders, [&](std::size_t i, const NamedTensors& deltas) {
    const auto mine = carried.of(deltas);
    double squares = 0.0;
    for (const auto& [t, delta] : mine) squares += sumOfSquares(diff(*delta, v[t]));
    if (!mine.empty()) out[i] = std::sqrt(squares);
  });
  if (!pass) return makeError(pass.error());
  return out;
}

// v_t ← v_t + (1/W_t) Σ_i w_i · scale_i · (x_{i,t} − v_t), the sum in sender order, W_t the
// weight of the contributions carrying t (with every w_i = 1: n_t and the unweighted sum).
Status moveCenter(const Carried& carried, const std::vector<SenderDeltas>& senders, const std::vector<double>& scale,
                  std::vector<at::Tensor>& v) {
  std::vector<at::Tensor> sum(v.size());
  std::vector<double> weight(v.size(), 0.0);
  auto pass = forEachSender(senders, [&](std::size_t i, const NamedTensors& deltas) {
    const double w = senders[i].weight;
    for (const auto& [t, delta] : carried.of(deltas)) {
      at::Tensor term = diff(*delta, v[t]) * scale[i];
      if (w != 1.0) term = term * w;  // ×1 is exact: skipped
      sum[t] = sum[t].defined() ? sum[t] + term : term;
      weight[t] += w;
    }
  });
  if (!pass) return pass;
  for (std::size_t t = 0; t < v.size(); ++t)
    if (weight[t] > 0.0) v[t] = v[t] + sum[t] / weight[t];
  return {};
}

}  // namespace

Expected<std::vector<at::Tensor>> centeredClip(const std::vector<SharedTensor>& tensors,
                                               const std::vector<SenderDeltas>& senders, int iterations,
                                               double tauFactor, double tauFloor) {
  if (iterations < 1 || !(tauFactor > 0.0) || !std::isfinite(tauFactor) || !(tauFloor >= 0.0) ||
      !std::isfinite(tauFloor))
    throw std::invalid_argument("centered clipping: iterations must be >= 1, the tau factor > 0, its floor >= 0");
  std::vector<at::Tensor> v;
  for (const auto& t : tensors) v.push_back(torch::zeros(t.base->sizes(), torch::dtype(torch::kDouble)));
  const Carried carried(tensors);
  for (int round = 0; round < iterations; ++round) {
    auto d = distances(carried, senders, v);
    if (!d) return makeError(d.error());
    std::vector<std::pair<double, double>> present;  // (distance, weight)
    for (std::size_t i = 0; i < senders.size(); ++i)
      if ((*d)[i] >= 0.0) present.emplace_back((*d)[i], senders[i].weight);
    if (present.empty()) break;  // no contribution carries a shared tensor: v stays 0
    const double tau = std::max(tauFactor * weightedLowMedian(std::move(present)), tauFloor);
    std::vector<double> scale(senders.size(), 1.0);
    for (std::size_t i = 0; i < senders.size(); ++i)
      if ((*d)[i] > tau) scale[i] = tau / (*d)[i];  // d > tau >= 0, so d > 0
    if (auto moved = moveCenter(carried, senders, scale, v); !moved) return makeError(moved.error());
  }
  return v;
}

}  // namespace es::sync
