#include "core/sync/merge.h"

#include "core/model/tensor_names.h"
#include "core/sync/robust_aggregate.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <unordered_map>

// Arithmetic policy (both functions): every sum is formed in float64, one element-wise torch op at
// a time (add, sub, div, mul: each correctly rounded by IEEE 754, so vector width, thread count and
// device cannot change a bit), and the result is cast back to the base tensor's dtype once at the
// end. No fused op (add with alpha, addcmul) and no torch reduction is used on the merge path:
// their rounding depends on the kernel. The only reductions (w1 dot products for the warm-up's
// cosine similarity) are plain sequential C++ loops, so every peer picks the same donors.
// Contributions are summed in sender order, hence the result does not depend on arrival order.
// Centered clipping (robust_aggregate.h) follows the same policy; its distances are sequential loops.

namespace es::sync {
namespace {

using TensorIndex = std::unordered_map<std::string, const at::Tensor*>;

TensorIndex indexOf(const NamedTensors& tensors) {
  TensorIndex index;
  index.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) index.emplace(name, &tensor);
  return index;
}

// base + mean(deltas) in float64, cast back to base's dtype. `deltas` are in sender order.
at::Tensor addMean(const at::Tensor& base, const std::vector<const at::Tensor*>& deltas) {
  if (deltas.empty()) return base.clone();
  for (const at::Tensor* d : deltas) {  // never let broadcasting hide a misshapen delta
    if (d->sizes() != base.sizes()) throw std::invalid_argument("aggregate: delta shape differs from its base tensor");
  }
  const auto f64 = base.options().dtype(at::kDouble);
  at::Tensor sum = deltas.front()->to(f64);
  for (std::size_t i = 1; i < deltas.size(); ++i) sum = sum + deltas[i]->to(f64);
  const at::Tensor mean = sum / static_cast<double>(deltas.size());
  return (base.to(at::kDouble) + mean).to(base.scalar_type());
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

// Sender order, never arrival order. Two contributions of one sender could only be ordered by
// arrival, so they are a caller error (the round keeps one contribution per sender).
std::vector<const Contribution*> senderOrder(const std::vector<Contribution>& contributions) {
  std::vector<const Contribution*> sorted;
  for (const auto& c : contributions) sorted.push_back(&c);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->sender < b->sender; });
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->sender == sorted[i - 1]->sender)
      throw std::invalid_argument("aggregate: two contributions from sender \"" + sorted[i]->sender + "\"");
  }
  return sorted;
}

}  // namespace

std::optional<SharedRule> parseSharedRule(const std::string& name) {
  if (name == "mean") return SharedRule::Mean;
  if (name == "centered_clip") return SharedRule::CenteredClip;
  return std::nullopt;
}

std::string sharedRuleName(SharedRule rule) { return rule == SharedRule::Mean ? "mean" : "centered_clip"; }

NamedTensors aggregate(const NamedTensors& base, const std::vector<Contribution>& contributions,
                       const Ownership& owners, const AggregatePolicy& policy) {
  const auto sorted = senderOrder(contributions);
  std::vector<TensorIndex> indexes;
  for (const auto* c : sorted) indexes.push_back(indexOf(c->deltas));

  // Every tensor's deltas in sender order, tagged with the sender's index; experts' owners only.
  static const std::set<std::string> kNoOwners;
  std::vector<SharedDeltas> shared;  // shared tensors, for centered clipping
  std::vector<std::vector<const at::Tensor*>> deltasOf(base.size());
  std::vector<int> sharedSlot(base.size(), -1);
  for (std::size_t b = 0; b < base.size(); ++b) {
    const auto& [name, tensor] = base[b];
    const auto expert = model::expertOf(name);
    const std::set<std::string>* ownersOfTensor = nullptr;  // null: shared, everyone counts
    if (expert) {
      const auto it = owners.find(expert->expert);
      ownersOfTensor = it != owners.end() ? &it->second : &kNoOwners;
    }
    SharedDeltas entry{name, &tensor, {}};
    for (std::size_t i = 0; i < sorted.size(); ++i) {
      if (ownersOfTensor && ownersOfTensor->count(sorted[i]->sender) == 0) continue;
      const auto it = indexes[i].find(name);
      if (it == indexes[i].end()) continue;
      deltasOf[b].push_back(it->second);
      entry.deltas.emplace_back(i, it->second);
    }
    if (!ownersOfTensor && policy.shared == SharedRule::CenteredClip) {
      sharedSlot[b] = static_cast<int>(shared.size());
      shared.push_back(std::move(entry));
    }
  }
  std::vector<at::Tensor> clipped;
  if (!shared.empty()) clipped = centeredClip(shared, sorted.size(), policy.clipIterations, policy.clipTauFactor);

  NamedTensors merged;
  merged.reserve(base.size());
  for (std::size_t b = 0; b < base.size(); ++b) {
    const at::Tensor tensor = base[b].second.detach();
    if (sharedSlot[b] < 0) {
      merged.emplace_back(base[b].first, addMean(tensor, deltasOf[b]));
    } else {
      const at::Tensor& delta = clipped[static_cast<std::size_t>(sharedSlot[b])];
      merged.emplace_back(base[b].first, (tensor.to(at::kDouble) + delta.to(tensor.device())).to(tensor.scalar_type()));
    }
  }
  return merged;
}

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
