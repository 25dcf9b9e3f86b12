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

// A contiguous float32 CPU view (no copy for the merge's own tensors, already that).
at::Tensor cpuFloat(const at::Tensor& t) { return t.detach().to(at::kCPU, at::kFloat).contiguous(); }

// A shared tensor's merged update, read as merged − base element by element in float64: no copy
// of the whole update (a float64 one was ~400 MB for the gpu-1b preset's shared weights).
struct Update {
  at::Tensor base, merged;  // float32, contiguous
};

// Sequential float64 Σ d·(m − b) and Σ d·d (a torch reduction's rounding depends on kernel and
// threads); with d = m − b itself, Σ u·u.
void accumulate(const float* d, const Update& u, bool self, double& dot, double& squares) {
  const float* pb = u.base.data_ptr<float>();
  const float* pm = u.merged.data_ptr<float>();
  for (std::int64_t i = 0, n = u.base.numel(); i < n; ++i) {
    const double step = double(pm[i]) - double(pb[i]);
    const double x = self ? step : double(d[i]);
    dot += x * step;
    squares += x * x;
  }
}

}  // namespace

bool Agreement::credited() const {
  return sharedElements > 0 && cosine > std::min(kAgreementCap, kAgreementSigmas / std::sqrt(double(sharedElements)));
}

Expected<std::vector<Agreement>> agreementWithMerge(const NamedTensors& base, const NamedTensors& merged,
                                                    const std::vector<SenderDeltas>& senders) {
  std::map<std::string, Update> update;  // shared tensors, name order
  for (std::size_t i = 0; i < base.size() && i < merged.size(); ++i)
    if (!model::expertOf(base[i].first) && base[i].first == merged[i].first)
      update.emplace(base[i].first, Update{cpuFloat(base[i].second), cpuFloat(merged[i].second)});
  std::int64_t elements = 0;
  double updateSquares = 0.0, unused = 0.0;
  for (const auto& [name, u] : update) {
    elements += u.base.numel();
    accumulate(nullptr, u, true, updateSquares, unused);
  }
  std::vector<Agreement> out(senders.size());
  auto pass = forEachSender(senders, [&](std::size_t i, const NamedTensors& deltas) {
    std::vector<std::pair<std::string, const at::Tensor*>> shared;
    for (const auto& [name, delta] : deltas)
      if (update.count(name) && update.at(name).base.sizes() == delta.sizes()) shared.emplace_back(name, &delta);
    std::sort(shared.begin(), shared.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    shared.erase(
        std::unique(shared.begin(), shared.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
        shared.end());
    double dot = 0.0, squares = 0.0;
    for (const auto& [name, delta] : shared) {
      const at::Tensor d = cpuFloat(*delta);  // the decoded delta itself when float32 already
      accumulate(d.data_ptr<float>(), update.at(name), false, dot, squares);
    }
    out[i].sharedElements = elements;
    if (squares > 0.0 && updateSquares > 0.0) out[i].cosine = dot / std::sqrt(squares * updateSquares);
  });
  if (!pass) return makeError(pass.error());
  return out;
}

}  // namespace es::sync
