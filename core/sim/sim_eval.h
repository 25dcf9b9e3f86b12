// Validation loss of any weights on windows spread evenly over the WHOLE validation set (internal
// to es_sim). Not Trainer::evaluate(): that reads the first windows of val.bin only, and the
// bundled corpus is chronological, so its slice is 1790s–1810s English — a peer whose shard
// holds that era would be favoured. Every strategy is measured with the same evaluator.
#pragma once

#include "core/sim/simulated_swarm.h"
#include "core/train/trainer.h"

#include <memory>

namespace es::sim::detail {

class Evaluator {
 public:
  // windows = config.evalWindows, or train.evalBatches × train.batchSize when 0.
  static Expected<Evaluator> create(const SimConfig& config, const train::RunData& data);

  // Mean cross-entropy per token over the windows.
  Expected<double> operator()(const ckpt::NamedTensors& weights);

 private:
  Evaluator(std::unique_ptr<train::Trainer> trainer, train::TokenBuffer val, int windows, int batch);
  std::unique_ptr<train::Trainer> trainer_;  // holds the model the weights are loaded into
  train::TokenBuffer val_;
  int windows_ = 0;
  int batch_ = 0;
};

}  // namespace es::sim::detail
