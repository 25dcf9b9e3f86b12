#include "core/sync/work_credit.h"

#include "core/model/tensor_names.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

namespace es::sync {
namespace {

using ckpt::NamedTensors;

at::Tensor cpuDouble(const at::Tensor& t) { return t.detach().to(at::kCPU, at::kDouble).contiguous(); }

// Sequential float64 Σ a·b and Σ a·a (a torch reduction's rounding depends on kernel and threads).
void accumulate(const at::Tensor& a, const at::Tensor& b, double& dot, double& squares) {
  const double* pa = a.data_ptr<double>();
  const double* pb = b.data_ptr<double>();
  for (std::int64_t i = 0, n = a.numel(); i < n; ++i) {
    dot += pa[i] * pb[i];
    squares += pa[i] * pa[i];
  }
}

}  // namespace

bool Agreement::credited() const {
  return sharedElements > 0 && cosine > std::min(kAgreementCap, kAgreementSigmas / std::sqrt(double(sharedElements)));
}

Expected<std::vector<Agreement>> agreementWithMerge(const NamedTensors& base, const NamedTensors& merged,
                                                    const std::vector<SenderDeltas>& senders) {
  std::map<std::string, at::Tensor> update;  // name → merged − base, shared tensors, name order
  for (std::size_t i = 0; i < base.size() && i < merged.size(); ++i)
    if (!model::expertOf(base[i].first) && base[i].first == merged[i].first)
      update.emplace(base[i].first, cpuDouble(merged[i].second) - cpuDouble(base[i].second));
  std::int64_t elements = 0;
  double updateSquares = 0.0, unused = 0.0;
  for (const auto& [name, u] : update) {
    elements += u.numel();
    accumulate(u, u, updateSquares, unused);
  }
  std::vector<Agreement> out(senders.size());
  auto pass = forEachSender(senders, [&](std::size_t i, const NamedTensors& deltas) {
    std::vector<std::pair<std::string, const at::Tensor*>> shared;
    for (const auto& [name, delta] : deltas)
      if (update.count(name) && update.at(name).sizes() == delta.sizes()) shared.emplace_back(name, &delta);
    std::sort(shared.begin(), shared.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    shared.erase(
        std::unique(shared.begin(), shared.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
        shared.end());
    double dot = 0.0, squares = 0.0;
    for (const auto& [name, delta] : shared) accumulate(cpuDouble(*delta), update.at(name), dot, squares);
    out[i].sharedElements = elements;
    if (squares > 0.0 && updateSquares > 0.0) out[i].cosine = dot / std::sqrt(squares * updateSquares);
  });
  if (!pass) return makeError(pass.error());
  return out;
}

}  // namespace es::sync
