#include "core/train/trainer_weights.h"

#include "core/train/trainer_impl.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <map>

namespace es::train {

ckpt::NamedTensors trainerWeights(const Trainer& trainer) {
  auto& impl = const_cast<Trainer&>(trainer).impl();  // read-only use of the module tree
  ckpt::NamedTensors out;
  if (impl.device.is_cpu()) {
    for (const auto& item : impl.model->named_parameters())
      out.emplace_back(item.key(), item.value().detach().to(torch::kCPU, torch::kFloat, false, /*copy=*/true));
    return out;
  }
  // From a GPU: every tensor copied asynchronously into pinned memory (LibTorch's caching host
  // allocator reuses those blocks round after round), then one wait for all of them. A plain
  // .to(kCPU) per tensor copied into pageable memory and waited for the GPU once per tensor.
  // The master weights are float32 (bf16 is autocast's compute type only), so no cast is needed.
  const auto pinned = torch::TensorOptions().dtype(torch::kFloat).pinned_memory(true);
  for (const auto& item : impl.model->named_parameters()) {
    auto host = torch::empty(item.value().sizes(), pinned);
    host.copy_(item.value().detach(), /*non_blocking=*/true);
    out.emplace_back(item.key(), std::move(host));
  }
  torch::cuda::synchronize(impl.device.index());
  return out;
}

Status setTrainerWeights(Trainer& trainer, const ckpt::NamedTensors& weights) {
  auto& impl = trainer.impl();
  std::map<std::string, const torch::Tensor*> byName;
  for (const auto& [name, t] : weights) byName[name] = &t;
  auto params = impl.model->named_parameters();
  if (byName.size() != params.size())
    return makeError("merged state has " + std::to_string(byName.size()) + " tensors, the model " +
                     std::to_string(params.size()));
  for (const auto& item : params) {
    auto it = byName.find(item.key());
    if (it == byName.end()) return makeError("merged state lacks \"" + item.key() + "\"");
    if (!it->second->sizes().equals(item.value().sizes()))
      return makeError("merged tensor \"" + item.key() + "\" has the wrong shape");
  }
  torch::NoGradGuard noGrad;
  for (auto& item : params) item.value().copy_(*byName[item.key()]);
  return {};
}

}  // namespace es::train
