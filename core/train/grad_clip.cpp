#include "core/train/grad_clip.h"

#include "core/model/torch_compat.h"

#include <torch/torch.h>

namespace es::train {

bool multiTensorClipAvailable() { return ES_TORCH_AT_LEAST(2, 1); }

torch::Tensor clipGradNorm(const std::vector<torch::Tensor>& params, double maxNorm) {
  torch::NoGradGuard noGrad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return {};
#if ES_TORCH_AT_LEAST(2, 1)
  const auto norms = at::_foreach_norm(grads, 2);
#else
  std::vector<torch::Tensor> norms;
  for (const auto& g : grads) norms.push_back(g.norm(2));
#endif
  auto total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  auto coefficient = (maxNorm / (total + 1e-6)).clamp_max(1.0);
#if ES_TORCH_AT_LEAST(2, 1)
  at::_foreach_mul_(grads, coefficient);
#else
  for (auto& g : grads) g.mul_(coefficient);
#endif
  return total;
}

}  // namespace es::train
