#include "core/model/cross_entropy.h"

#include "core/model/cross_entropy_kernel.h"
#include "core/model/torch_compat.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

namespace es::model {
namespace {

constexpr std::int64_t kRowGrain = 16;  // rows a task takes at least (a row is a vocabulary)

class FusedCrossEntropy : public torch::autograd::Function<FusedCrossEntropy> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& targets) {
    auto x = logits.contiguous();
    auto t = targets.contiguous();
    const std::int64_t rows = x.size(0), vocab = x.size(1);
    auto lse = torch::empty({rows}, x.options()), loss = torch::empty({rows}, x.options());
    const float* xp = x.data_ptr<float>();
    const std::int64_t* tp = t.data_ptr<std::int64_t>();
    float *lp = lse.data_ptr<float>(), *sp = loss.data_ptr<float>();
    at::parallel_for(0, rows, kRowGrain, [&](std::int64_t begin, std::int64_t end) {
      crossEntropyRows(xp + begin * vocab, tp + begin, lp + begin, sp + begin, end - begin, vocab);
    });
    ctx->save_for_backward({x, t, lse});
    return loss.mean();
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &t = saved[1], &lse = saved[2];
    const std::int64_t rows = x.size(0), vocab = x.size(1);
    const float scale = grads[0].item<float>() / float(rows);
    auto grad = torch::empty_like(x);
    const float *xp = x.data_ptr<float>(), *lp = lse.data_ptr<float>();
    const std::int64_t* tp = t.data_ptr<std::int64_t>();
    float* gp = grad.data_ptr<float>();
    at::parallel_for(0, rows, kRowGrain, [&](std::int64_t begin, std::int64_t end) {
      crossEntropyRowsBackward(xp + begin * vocab, tp + begin, lp + begin, scale, gp + begin * vocab, end - begin,
                               vocab);
    });
    return {grad, torch::Tensor()};
  }
};

bool fusedApplies(const torch::Tensor& logits, const torch::Tensor& targets) {
  if (!logits.device().is_cpu() || logits.scalar_type() != torch::kFloat32 || logits.dim() != 2 ||
      logits.size(0) == 0 || targets.scalar_type() != torch::kInt64 || targets.dim() != 1 ||
      targets.size(0) != logits.size(0) || autocastEnabled(c10::DeviceType::CPU))
    return false;
  // Out-of-range targets (an ignore_index): LibTorch's own rule and error.
  return targets.min().item<std::int64_t>() >= 0 && targets.max().item<std::int64_t>() < logits.size(1);
}

}  // namespace

torch::Tensor crossEntropyReference(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::nn::functional::cross_entropy(logits, targets);
}

torch::Tensor crossEntropy(const torch::Tensor& logits, const torch::Tensor& targets) {
  if (!fusedApplies(logits, targets)) return crossEntropyReference(logits, targets);
  return FusedCrossEntropy::apply(logits, targets);
}

}  // namespace es::model
