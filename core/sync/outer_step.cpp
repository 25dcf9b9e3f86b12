#include "core/sync/outer_step.h"

#include <torch/torch.h>

#include <map>
#include <stdexcept>

namespace es::sync {

NamedTensors zeroMomentum(const NamedTensors& base, const OuterRule& rule) {
  NamedTensors out;
  for (const auto& [name, t] : base)
    if (takesOuterStep(rule, name)) out.emplace_back(kMomentumPrefix + name, torch::zeros_like(t));
  return out;
}

OuterStepResult applyOuterStep(const NamedTensors& base, NamedTensors merged, const NamedTensors& momentum,
                               const OuterRule& rule) {
  if (merged.size() != base.size()) throw std::invalid_argument("applyOuterStep: merged and base differ");
  std::map<std::string, const at::Tensor*> previous;
  for (const auto& [name, t] : momentum) previous[name] = &t;
  OuterStepResult out;
  for (std::size_t i = 0; i < base.size(); ++i) {
    const auto& [name, b] = base[i];
    if (merged[i].first != name) throw std::invalid_argument("applyOuterStep: merged and base differ");
    if (!takesOuterStep(rule, name)) {
      out.merged.push_back(std::move(merged[i]));
      continue;
    }
    const auto b64 = b.to(at::kDouble);
    const auto delta = merged[i].second.to(at::kDouble) - b64;
    auto m = delta;
    if (auto it = previous.find(kMomentumPrefix + name); it != previous.end()) {
      if (it->second->sizes() != b.sizes()) throw std::invalid_argument("applyOuterStep: momentum of " + name);
      m = it->second->to(at::kDouble) * rule.momentum + delta;
    } else if (!momentum.empty()) {
      throw std::invalid_argument("applyOuterStep: no momentum for " + name);
    }
    const auto stepped = b64 + (delta + m * rule.momentum) * rule.lr;
    out.merged.emplace_back(name, stepped.to(b.scalar_type()));
    out.momentum.emplace_back(kMomentumPrefix + name, m.to(at::kFloat));
  }
  return out;
}

NamedTensors withMomentum(const NamedTensors& base, const NamedTensors& momentum) {
  NamedTensors out = base;
  out.insert(out.end(), momentum.begin(), momentum.end());
  return out;
}

}  // namespace es::sync
