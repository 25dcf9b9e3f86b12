#include "core/train/sparse_adamw.h"

#include <torch/torch.h>

#include <cmath>
#include <map>

namespace es::train {

SparseAdamW::SparseAdamW(const ckpt::NamedTensors& trainable, AdamWHyper hyper) : hyper_(hyper) {
  slots_.reserve(trainable.size());
  for (const auto& [name, param] : trainable) {
    Slot s;
    s.name = name;
    s.param = param;
    s.expAvg = torch::zeros_like(param, torch::MemoryFormat::Contiguous);
    s.expAvgSq = torch::zeros_like(param, torch::MemoryFormat::Contiguous);
    s.decay = param.dim() >= 2;
    slots_.push_back(std::move(s));
  }
}

void SparseAdamW::step(double lr, std::int64_t t) {
  torch::NoGradGuard noGrad;
  const double bc1 = 1.0 - std::pow(hyper_.beta1, double(t));
  const double bc2 = 1.0 - std::pow(hyper_.beta2, double(t));
  for (auto& s : slots_) {
    const auto& grad = s.param.grad();
    s.expAvg.mul_(hyper_.beta1);
    s.expAvgSq.mul_(hyper_.beta2);
    if (grad.defined()) {
      s.expAvg.add_(grad, 1.0 - hyper_.beta1);
      s.expAvgSq.addcmul_(grad, grad, 1.0 - hyper_.beta2);
    }
    if (s.decay) s.param.mul_(1.0 - lr * hyper_.weightDecay);
    auto denom = (s.expAvgSq.sqrt() / std::sqrt(bc2)).add_(hyper_.eps);
    s.param.addcdiv_(s.expAvg, denom, -lr / bc1);
  }
}

ckpt::NamedTensors SparseAdamW::expAvg() const {
  ckpt::NamedTensors out;
  for (const auto& s : slots_) out.emplace_back(s.name, s.expAvg);
  return out;
}

ckpt::NamedTensors SparseAdamW::expAvgSq() const {
  ckpt::NamedTensors out;
  for (const auto& s : slots_) out.emplace_back(s.name, s.expAvgSq);
  return out;
}

Status SparseAdamW::loadMoments(const ckpt::NamedTensors& expAvg, const ckpt::NamedTensors& expAvgSq) {
  std::map<std::string, const torch::Tensor*> m, v;
  for (const auto& [name, t] : expAvg) m[name] = &t;
  for (const auto& [name, t] : expAvgSq) v[name] = &t;
  torch::NoGradGuard noGrad;
  for (auto& s : slots_) {
    auto im = m.find(s.name), iv = v.find(s.name);
    if (im == m.end() || iv == v.end()) {
      s.expAvg.zero_();
      s.expAvgSq.zero_();
      continue;
    }
    if (!im->second->sizes().equals(s.param.sizes()) || !iv->second->sizes().equals(s.param.sizes()))
      return makeError("optimizer state for \"" + s.name + "\" has the wrong shape");
    s.expAvg.copy_(*im->second);
    s.expAvgSq.copy_(*iv->second);
  }
  return {};
}

std::int64_t SparseAdamW::stateBytes() const {
  std::int64_t bytes = 0;
  for (const auto& s : slots_) bytes += 2 * s.param.numel() * static_cast<std::int64_t>(s.param.element_size());
  return bytes;
}

}  // namespace es::train
