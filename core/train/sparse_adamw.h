// AdamW over the trainable tensors only (decoupled weight decay, as torch.optim.AdamW).
// Frozen experts are simply not here: no moments, no update, no memory. Our own rather than
// torch::optim::AdamW because its state is keyed by TensorImpl pointers (and the key type changed
// between LibTorch 1.13 and 2.x); here each moment has the tensor's wire name, so it can be
// checkpointed, resumed, and kept across merges by name. On CPU the update is one fused pass per
// tensor (adamw_kernel.h).
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
};

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
  std::vector<Slot> slots_;
  AdamWHyper hyper_;
};

}  // namespace es::train
