#include "core/sim/sim_eval.h"

#include "core/train/trainer_impl.h"
#include "core/train/trainer_weights.h"

#include <torch/torch.h>

#include <algorithm>

namespace es::sim::detail {

Expected<Evaluator> Evaluator::create(const SimConfig& c, const train::RunData& data) {
  const int windows = c.evalWindows > 0 ? c.evalWindows : c.train.evalBatches * c.train.batchSize;
  const auto need = static_cast<std::size_t>(c.model.seqLen) + 1;
  if (windows < 1 || !data.val || data.val->size() < need) return makeError("evaluator: no validation windows");
  // One local expert keeps the evaluator's (unused) optimizer state small.
  train::TrainerOptions options{c.model, c.train, c.seed, c.dataSeed, {0}};
  auto trainer = train::Trainer::create(options, data.train, data.val);
  if (!trainer) return makeError("evaluator: " + trainer.error());
  return Evaluator(std::move(*trainer), data.val, windows, std::max(1, c.train.batchSize));
}

Evaluator::Evaluator(std::unique_ptr<train::Trainer> trainer, train::TokenBuffer val, int windows, int batch)
    : trainer_(std::move(trainer)), val_(std::move(val)), windows_(windows), batch_(batch) {}

Expected<double> Evaluator::operator()(const ckpt::NamedTensors& weights) {
  if (auto set = train::setTrainerWeights(*trainer_, weights); !set) return makeError(set.error());
  auto& impl = trainer_->impl();
  const int T = impl.options.model.seqLen;
  const auto starts = static_cast<std::int64_t>(val_->size()) - T - 1;  // last valid window start
  torch::NoGradGuard noGrad;
  double sum = 0;
  std::int64_t count = 0;
  for (int first = 0; first < windows_; first += batch_) {
    const int rows = std::min(batch_, windows_ - first);
    auto window = torch::empty({rows, T + 1}, torch::kLong);
    auto* out = window.data_ptr<std::int64_t>();
    for (int r = 0; r < rows; ++r) {
      const int j = first + r;  // evenly from the first to the last possible window
      const std::int64_t start = windows_ == 1 ? 0 : starts * j / (windows_ - 1);
      for (int t = 0; t <= T; ++t) out[r * (T + 1) + t] = (*val_)[static_cast<std::size_t>(start + t)];
    }
    const auto inputs = window.narrow(1, 0, T).contiguous().to(impl.device);
    const auto targets = window.narrow(1, 1, T).contiguous().to(impl.device);
    const auto logits = impl.model->forward(inputs).logits;
    sum += torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
                                                torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
               .item<double>();
    count += targets.numel();
  }
  return sum / double(count);
}

}  // namespace es::sim::detail
