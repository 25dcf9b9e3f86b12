#include "core/train/sparse_adamw.h"

#include "core/model/torch_compat.h"
#include "core/train/adamw_kernel.h"

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

namespace {

// The fused kernel applies to float32 CPU tensors with contiguous memory (every tensor of the
// model on CPU); anything else (a GPU, another dtype) takes the LibTorch-op path.
bool fusable(const torch::Tensor& param, const torch::Tensor& grad) {
  const auto ok = [](const torch::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous();
  };
  return ok(param) && (!grad.defined() || ok(grad));
}

}  // namespace

void SparseAdamW::step(double lr, std::int64_t t) {
  torch::NoGradGuard noGrad;
  if (hyper_.multiTensor && stepMultiTensor(lr, t)) return;
  const double bc1 = 1.0 - std::pow(hyper_.beta1, double(t));
  const double bc2 = 1.0 - std::pow(hyper_.beta2, double(t));
  for (auto& s : slots_) stepSlot(s, lr, bc1, bc2);
}

void SparseAdamW::stepSlot(Slot& s, double lr, double bc1, double bc2) {
  const auto& grad = s.param.grad();
  const double decayFactor = s.decay ? 1.0 - lr * hyper_.weightDecay : 1.0;
  if (fusable(s.param, grad)) {
    const AdamWScalars k{float(hyper_.beta1), float(hyper_.beta2), float(hyper_.eps),
                         float(decayFactor),  float(lr / bc1),     float(1.0 / std::sqrt(bc2))};
    float* p = s.param.data_ptr<float>();
    const float* g = grad.defined() ? grad.data_ptr<float>() : nullptr;
    float* m = s.expAvg.data_ptr<float>();
    float* v = s.expAvgSq.data_ptr<float>();
    // Elementwise only: the result does not depend on how the range is split across threads.
    at::parallel_for(0, s.param.numel(), 1 << 14, [&](std::int64_t begin, std::int64_t end) {
      adamwUpdate(p + begin, g ? g + begin : nullptr, m + begin, v + begin, end - begin, k);
    });
    return;
  }
  s.expAvg.mul_(hyper_.beta1);
  s.expAvgSq.mul_(hyper_.beta2);
  if (grad.defined()) {
    s.expAvg.add_(grad, 1.0 - hyper_.beta1);
    s.expAvgSq.addcmul_(grad, grad, 1.0 - hyper_.beta2);
  }
  if (s.decay) s.param.mul_(decayFactor);
  auto denom = (s.expAvgSq.sqrt() / std::sqrt(bc2)).add_(hyper_.eps);
  s.param.addcdiv_(s.expAvg, denom, -lr / bc1);
}

#if ES_TORCH_AT_LEAST(2, 4)
bool multiTensorAdamWAvailable() { return true; }

bool SparseAdamW::stepMultiTensor(double lr, std::int64_t t) {
  if (slots_.empty()) return true;
  if (!stepCount_.defined())
    stepCount_ = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(slots_.front().param.device()));
  stepCount_.fill_(double(t));  // the kernel takes bias corrections from it (PyTorch increments it first)
  const double bc1 = 1.0 - std::pow(hyper_.beta1, double(t));
  const double bc2 = 1.0 - std::pow(hyper_.beta2, double(t));
  // Two groups (matrices decay, vectors do not); a tensor without a gradient (an idle expert)
  // takes the per-tensor path rather than a zero gradient allocated for it.
  for (const bool decay : {true, false}) {
    std::vector<torch::Tensor> params, grads, moments1, moments2, steps;
    for (auto& s : slots_) {
      if (s.decay != decay) continue;
      if (!s.param.grad().defined()) {
        stepSlot(s, lr, bc1, bc2);
        continue;
      }
      params.push_back(s.param);
      grads.push_back(s.param.grad());
      moments1.push_back(s.expAvg);
      moments2.push_back(s.expAvgSq);
      steps.push_back(stepCount_);  // read only: one tensor serves every slot
    }
    if (params.empty()) continue;
    at::_fused_adamw_(params, grads, moments1, moments2, /*max_exp_avg_sqs=*/{}, steps, lr, hyper_.beta1, hyper_.beta2,
                      decay ? hyper_.weightDecay : 0.0, hyper_.eps, /*amsgrad=*/false,
                      /*maximize=*/false);
  }
  return true;
}
#else
bool multiTensorAdamWAvailable() { return false; }

bool SparseAdamW::stepMultiTensor(double, std::int64_t) { return false; }
#endif

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
  // Check everything before changing anything: a failed load leaves the optimizer as it was.
  for (const auto& s : slots_) {
    auto im = m.find(s.name), iv = v.find(s.name);
    if (im == m.end() || iv == v.end()) continue;
    if (!im->second->sizes().equals(s.param.sizes()) || !iv->second->sizes().equals(s.param.sizes()))
      return makeError("optimizer state for \"" + s.name + "\" has the wrong shape");
  }
  torch::NoGradGuard noGrad;
  for (auto& s : slots_) {
    auto im = m.find(s.name), iv = v.find(s.name);
    if (im == m.end() || iv == v.end()) {
      s.expAvg.zero_();
      s.expAvgSq.zero_();
      continue;
    }
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
