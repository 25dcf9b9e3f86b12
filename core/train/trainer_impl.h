// Trainer internals, exposed for tests and benchmarks only (they inspect tensors, gradients and
// optimizer slots). Production code uses trainer.h.
#pragma once

#include "core/model/moe_transformer.h"
#include "core/train/batch_sampler.h"
#include "core/train/sparse_adamw.h"
#include "core/train/trainer.h"

#include <memory>

namespace es::train {

struct TrainerImpl {
  TrainerOptions options;
  model::MoeTransformer model{nullptr};
  std::unique_ptr<SparseAdamW> optimizer;
  std::unique_ptr<BatchSampler> trainSampler;
  std::unique_ptr<BatchSampler> valSampler;
  std::vector<int> localExperts;  // sorted
  torch::Device device{torch::kCPU};
  bool bf16 = false;  // options.precision resolved for the device
  std::int64_t step = 0;
  std::uint64_t dataCursor = 0;
};

}  // namespace es::train
