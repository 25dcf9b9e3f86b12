// AdamW over the trainable tensors only (decoupled weight decay, as torch.optim.AdamW).
// Frozen experts are simply not here: no moments, no update, no memory. Our own rather than
// torch::optim::AdamW because its state is keyed by TensorImpl pointers (and the key type changed
// between LibTorch 1.13 and 2.x); here each moment has the tensor's wire name, so it can be
// checkpointed, resumed, and kept across merges by name. On CPU the update is one fused pass per
// tensor (adamw_kernel.h); on a GPU with LibTorch >= 2.4, one multi-tensor kernel for all of them
// (at::_fused_adamw_: a launch per group instead of ~9 per tensor).
#pragma once

#include "core/checkpoint/safetensors.h"

#include <torch/types.h>

#include <string>
#include <vector>

namespace es::train {

struct AdamWHyper {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weightDecay = 0.1;
  // at::_fused_adamw_ for every tensor with a gradient (LibTorch >= 2.4; ignored before). The
  // trainer sets it on a GPU; tests set it on the CPU to compare it with the per-tensor path.
  bool multiTensor = false;
};

// Whether this LibTorch has the multi-tensor AdamW kernel (at::_fused_adamw_, 2.4 and later).
bool multiTensorAdamWAvailable();

class SparseAdamW {
 public:
  struct Slot {
    std::string name;
    torch::Tensor param;
    torch::Tensor expAvg;
    torch::Tensor expAvgSq;
    bool decay = false;  // matrices decay; norm weights (1-D) do not
  };

  SparseAdamW(const ckpt::NamedTensors& trainable, AdamWHyper hyper);

  // One update with learning rate `lr`; `t` is the 1-based step for bias correction. A tensor
  // whose gradient is undefined (an expert no token was routed to) counts as a zero gradient,
  // as in a dense MoE implementation: its moments decay and it keeps moving with momentum.
  void step(double lr, std::int64_t t);

  const std::vector<Slot>& slots() const { return slots_; }

  ckpt::NamedTensors expAvg() const;
  ckpt::NamedTensors expAvgSq() const;
  // Copies moments by name; slots without an entry start from zero, entries without a slot
  // (tensors no longer trainable) are ignored. Shapes must match.
  Status loadMoments(const ckpt::NamedTensors& expAvg, const ckpt::NamedTensors& expAvgSq);

  std::int64_t stateBytes() const;

 private:
  // The per-tensor update of one slot (the CPU kernel, else LibTorch ops).
  void stepSlot(Slot& s, double lr, double bc1, double bc2);
  // The multi-tensor update of every slot with a gradient; returns false if this build has none.
  bool stepMultiTensor(double lr, std::int64_t t);

  std::vector<Slot> slots_;
  AdamWHyper hyper_;
  torch::Tensor stepCount_;  // the multi-tensor kernel's step, a float tensor on the device
};

}  // namespace es::train
