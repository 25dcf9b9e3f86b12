// silu(a) · b through one fused pass forward and one backward (swiglu_kernel.h) where that kernel
// applies: float32 CPU tensors without autocast. Anything else (CUDA, bf16) takes LibTorch's
// composite, also the reference the fused one is tested against (tst_moe_model).
#include "core/model/moe_layer.h"
#include "core/model/swiglu_kernel.h"
#include "core/model/torch_compat.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

namespace es::model {
namespace {

constexpr std::int64_t kGrain = 1 << 14;  // elements a task takes at least

class FusedSwiglu : public torch::autograd::Function<FusedSwiglu> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a, const torch::Tensor& b) {
    auto gate = a.contiguous(), up = b.contiguous();
    auto h = torch::empty_like(gate);
    const float *ap = gate.data_ptr<float>(), *bp = up.data_ptr<float>();
    float* hp = h.data_ptr<float>();
    at::parallel_for(0, gate.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) {
      swigluForward(ap + begin, bp + begin, hp + begin, end - begin);
    });
    ctx->save_for_backward({gate, up});
    return h;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &gate = saved[0], &up = saved[1];
    auto g = grads[0].contiguous();
    auto ga = torch::empty_like(gate), gb = torch::empty_like(up);
    const float *ap = gate.data_ptr<float>(), *bp = up.data_ptr<float>(), *gp = g.data_ptr<float>();
    float *gap = ga.data_ptr<float>(), *gbp = gb.data_ptr<float>();
    at::parallel_for(0, gate.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) {
      swigluBackward(ap + begin, bp + begin, gp + begin, gap + begin, gbp + begin, end - begin);
    });
    return {ga, gb};
  }
};

bool fusedApplies(const torch::Tensor& a, const torch::Tensor& b) {
  return a.device().is_cpu() && b.device().is_cpu() && a.scalar_type() == torch::kFloat32 &&
         b.scalar_type() == torch::kFloat32 && a.sizes() == b.sizes() && !autocastEnabled(c10::DeviceType::CPU);
}

}  // namespace

torch::Tensor swigluReference(const torch::Tensor& a, const torch::Tensor& b) { return torch::silu(a) * b; }

torch::Tensor swiglu(const torch::Tensor& a, const torch::Tensor& b) {
  if (!fusedApplies(a, b)) return swigluReference(a, b);
  return FusedSwiglu::apply(a, b);
}

}  // namespace es::model
