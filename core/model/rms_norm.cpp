// RMSNorm through one fused pass forward and one backward (rms_norm_kernel.h) where that kernel
// applies: float32 CPU tensors without autocast. Anything else (CUDA, bf16) takes LibTorch's
// composite, which is also the reference the fused one is tested against (tst_moe_model).
#include "core/model/moe_transformer.h"
#include "core/model/rms_norm_kernel.h"
#include "core/model/torch_compat.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>

namespace es::model {
namespace {

// Rows a task takes, and the unit in which the weight's gradient is summed (in this fixed order,
// whatever the thread count).
constexpr std::int64_t kRowBlock = 64;

class FusedRmsNorm : public torch::autograd::Function<FusedRmsNorm> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               double eps) {
    auto input = x.contiguous();
    auto weight = w.contiguous();
    const std::int64_t d = input.size(-1), rows = input.numel() / std::max<std::int64_t>(1, d);
    auto y = torch::empty_like(input);
    auto rstd = torch::empty({rows}, input.options());
    const float *xp = input.data_ptr<float>(), *wp = weight.data_ptr<float>();
    float *yp = y.data_ptr<float>(), *sp = rstd.data_ptr<float>();
    at::parallel_for(0, rows, kRowBlock, [&](std::int64_t begin, std::int64_t end) {
      rmsNormRows(xp + begin * d, wp, yp + begin * d, sp + begin, end - begin, d, float(eps));
    });
    ctx->save_for_backward({input, weight, rstd});
    return y;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &input = saved[0], &weight = saved[1], &rstd = saved[2];
    auto g = grads[0].contiguous();
    const std::int64_t d = input.size(-1), rows = rstd.numel();
    const std::int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
    auto gx = torch::empty_like(input);
    auto gwBlocks = torch::zeros({blocks, d}, input.options());
    const float *xp = input.data_ptr<float>(), *wp = weight.data_ptr<float>(), *gp = g.data_ptr<float>();
    const float* sp = rstd.data_ptr<float>();
    float *gxp = gx.data_ptr<float>(), *gwp = gwBlocks.data_ptr<float>();
    at::parallel_for(0, blocks, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b) {
        const std::int64_t first = b * kRowBlock, count = std::min(kRowBlock, rows - first);
        rmsNormRowsBackward(xp + first * d, wp, gp + first * d, sp + first, gxp + first * d, gwp + b * d, count, d);
      }
    });
    return {gx, gwBlocks.sum(0), torch::Tensor()};
  }
};

bool fusedApplies(const torch::Tensor& x, const torch::Tensor& w) {
  return x.device().is_cpu() && w.device().is_cpu() && x.scalar_type() == torch::kFloat32 &&
         w.scalar_type() == torch::kFloat32 && x.dim() >= 1 && x.size(-1) == w.numel() &&
         !autocastEnabled(c10::DeviceType::CPU);
}

}  // namespace

torch::Tensor rmsNormReference(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * weight;
}

torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  if (!fusedApplies(x, weight)) return rmsNormReference(x, weight, eps);
  return FusedRmsNorm::apply(x, weight, eps);
}

RmsNormImpl::RmsNormImpl(int dim, double eps) : eps_(eps) { weight = register_parameter("weight", torch::ones({dim})); }

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) { return rmsNorm(x, weight, eps_); }

}  // namespace es::model
