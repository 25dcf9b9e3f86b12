// RoPE through one fused pass forward and one backward (rope_kernel.h) where that kernel applies:
// float32 CPU tensors [B, H, T, h] whose rows are contiguous (q and k are strided views of the
// qkv product: read in place, not copied), tables [T, h/2], no autocast. Anything else takes the
// composite, also the reference the fused one is tested against (tst_moe_model).
#include "core/model/moe_transformer.h"
#include "core/model/rope_kernel.h"
#include "core/model/torch_compat.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

namespace es::model {
namespace {

// Every row of `x` ([B, H, T, h], rows contiguous) rotated into the contiguous `out`.
void rotateAll(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, float sign,
               torch::Tensor& out) {
  const std::int64_t B = x.size(0), H = x.size(1), T = x.size(2), h = x.size(3), half = h / 2;
  const std::int64_t sB = x.stride(0), sH = x.stride(1), sT = x.stride(2);
  const float *xp = x.data_ptr<float>(), *cp = cos.data_ptr<float>(), *sp = sin.data_ptr<float>();
  float* op = out.data_ptr<float>();
  at::parallel_for(0, B * H, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t bh = begin; bh < end; ++bh) {
      const float* head = xp + (bh / H) * sB + (bh % H) * sH;
      for (std::int64_t t = 0; t < T; ++t)
        ropeRow(head + t * sT, cp + t * half, sp + t * half, sign, op + (bh * T + t) * h, half);
    }
  });
}

class FusedRope : public torch::autograd::Function<FusedRope> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos,
                               const torch::Tensor& sin) {
    auto out = torch::empty(x.sizes(), x.options());
    rotateAll(x, cos, sin, 1.0f, out);
    ctx->save_for_backward({cos, sin});
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto g = grads[0].contiguous();
    auto gx = torch::empty(g.sizes(), g.options());
    rotateAll(g, saved[0], saved[1], -1.0f, gx);
    return {gx, torch::Tensor(), torch::Tensor()};
  }
};

bool fusedApplies(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  if (x.dim() != 4 || x.size(3) % 2 != 0 || x.stride(3) != 1 || cos.dim() != 2 || !cos.is_contiguous() ||
      !sin.is_contiguous() || cos.sizes() != sin.sizes() || cos.size(0) != x.size(2) || cos.size(1) * 2 != x.size(3))
    return false;
  for (const auto* t : {&x, &cos, &sin})
    if (!t->device().is_cpu() || t->scalar_type() != torch::kFloat32) return false;
  return !autocastEnabled(c10::DeviceType::CPU) && !cos.requires_grad() && !sin.requires_grad();
}

}  // namespace

torch::Tensor applyRopeReference(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half);
  auto x2 = x.narrow(-1, half, half);
  return torch::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
}

torch::Tensor applyRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  if (!fusedApplies(x, cos, sin)) return applyRopeReference(x, cos, sin);
  return FusedRope::apply(x, cos, sin);
}

}  // namespace es::model
