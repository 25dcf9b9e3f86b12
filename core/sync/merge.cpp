#include "core/sync/merge.h"

#include "core/model/tensor_names.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <unordered_map>

// Arithmetic policy (aggregate.cpp and the warm-up here): every sum is formed in float64, one
// element-wise torch op at a time (add, sub, div, mul: each correctly rounded by IEEE 754, so
// vector width, thread count and device cannot change a bit), and the result is cast back to the
// base tensor's dtype once at the end. No fused op (add with alpha, addcmul) and no torch
// reduction is used on the merge path: their rounding depends on the kernel. The only reductions
// (w1 dot products for the warm-up's cosine similarity) are plain sequential C++ loops, so every
// peer picks the same donors. Contributions are summed in sender order, hence the result does not
// depend on arrival order. Centered clipping (robust_aggregate.h) follows the same policy; its
// distances are sequential loops.

namespace es::sync {
namespace {

using TensorIndex = std::unordered_map<std::string, const at::Tensor*>;

TensorIndex indexOf(const NamedTensors& tensors) {
  TensorIndex index;
  index.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) index.emplace(name, &tensor);
  return index;
}

// Sequential float64 dot product of two same-sized float32 CPU buffers (see policy above).
double dot(const float* a, const float* b, std::int64_t n) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return sum;
}

const at::Tensor& require(const TensorIndex& index, const std::string& name) {
  const auto it = index.find(name);
  if (it == index.end()) throw std::invalid_argument("merging warm-up: weights lack tensor \"" + name + "\"");
  return *it->second;
}

// Donors of every expert of one layer: its top-k most cosine-similar other experts by w1
// (ties: lower index first). A zero w1 has similarity 0 to everything.
std::vector<std::vector<int>> pickDonors(const std::vector<at::Tensor>& w1, int k) {
  const int experts = static_cast<int>(w1.size());
  std::vector<at::Tensor> flat;
  for (const auto& w : w1) flat.push_back(w.detach().to(at::kCPU, at::kFloat).contiguous().reshape({-1}));
  const std::int64_t n = flat.front().numel();
  for (const auto& f : flat) {
    if (f.numel() != n) throw std::invalid_argument("merging warm-up: experts' w1 differ in size");
  }
  std::vector<double> norm(experts);
  for (int e = 0; e < experts; ++e) {
    const float* p = flat[e].data_ptr<float>();
    norm[e] = std::sqrt(dot(p, p, n));
  }
  // Symmetric by construction: cos[i][j] and cos[j][i] are the same computation.
  std::vector<std::vector<double>> cosine(experts, std::vector<double>(experts, 0.0));
  for (int i = 0; i < experts; ++i) {
    for (int j = i + 1; j < experts; ++j) {
      const double d = dot(flat[i].data_ptr<float>(), flat[j].data_ptr<float>(), n);
      double c = norm[i] > 0.0 && norm[j] > 0.0 ? d / (norm[i] * norm[j]) : 0.0;
      if (!std::isfinite(c)) c = 0.0;  // keeps the sort's ordering strict on non-finite weights
      cosine[i][j] = cosine[j][i] = c;
    }
  }
  std::vector<std::vector<int>> donors(experts);
  for (int i = 0; i < experts; ++i) {
    std::vector<int> others;
    for (int j = 0; j < experts; ++j) {
      if (j != i) others.push_back(j);
    }
    std::stable_sort(others.begin(), others.end(), [&](int a, int b) { return cosine[i][a] > cosine[i][b]; });
    others.resize(static_cast<std::size_t>(k));
    donors[i] = std::move(others);
  }
  return donors;
}

}  // namespace

std::optional<SharedRule> parseSharedRule(const std::string& name) {
  if (name == "mean") return SharedRule::Mean;
  if (name == "centered_clip") return SharedRule::CenteredClip;
  return std::nullopt;
}

std::string sharedRuleName(SharedRule rule) { return rule == SharedRule::Mean ? "mean" : "centered_clip"; }

double warmupAlpha(const WarmupConfig& config, std::int64_t step) {
  if (config.interval <= 0 || config.decaySteps <= 0 || step < 0 || step % config.interval != 0) return 0.0;
  const double alpha = config.alpha0 * (1.0 - static_cast<double>(step) / static_cast<double>(config.decaySteps));
  return alpha > 0.0 ? alpha : 0.0;
}

NamedTensors applyMergingWarmup(const NamedTensors& weights, const model::ModelConfig& config, double alpha, int topk) {
  NamedTensors out;
  out.reserve(weights.size());
  const int experts = config.nExperts;
  const int k = std::min(topk, experts - 1);
  if (!(alpha > 0.0) || k <= 0) {  // nothing to blend: an unchanged copy
    for (const auto& [name, tensor] : weights) out.emplace_back(name, tensor.detach().clone());
    return out;
  }

  const TensorIndex index = indexOf(weights);
  std::unordered_map<std::string, at::Tensor> blended;  // expert tensor name -> warmed-up tensor
  for (int layer = 0; layer < config.nLayers; ++layer) {
    std::vector<at::Tensor> w1;
    for (int e = 0; e < experts; ++e) w1.push_back(require(index, model::expertTensorName(layer, e, "w1")));
    const auto donors = pickDonors(w1, k);
    for (const char* part : {"w1", "w2", "w3"}) {
      // Pre-warm-up weights of every expert, in float64: all experts blend simultaneously.
      std::vector<at::Tensor> before;
      for (int e = 0; e < experts; ++e)
        before.push_back(require(index, model::expertTensorName(layer, e, part)).detach().to(at::kDouble));
      for (int e = 0; e < experts; ++e) {
        at::Tensor sum = before[donors[e].front()] - before[e];
        for (std::size_t d = 1; d < donors[e].size(); ++d) sum = sum + (before[donors[e][d]] - before[e]);
        const at::Tensor step = (sum / static_cast<double>(donors[e].size())) * alpha;
        const std::string name = model::expertTensorName(layer, e, part);
        blended[name] = (before[e] + step).to(index.at(name)->scalar_type());
      }
    }
  }
  for (const auto& [name, tensor] : weights) {
    const auto it = blended.find(name);
    out.emplace_back(name, it != blended.end() ? it->second : tensor.detach().clone());
  }
  return out;
}

}  // namespace es::sync
