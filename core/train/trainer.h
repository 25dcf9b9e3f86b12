// One peer's trainer: the MoE model, AdamW over the shared tensors plus the peer's local experts,
// the LR schedule, SPES's load-balance ramp, deterministic batches, validation and the durable
// training state. No Torch types in this header: the app, the node and moc-read code include it.
// Not thread-safe: one thread owns a Trainer and every Torch object inside it.
#pragma once

#include "core/common/expected.h"
#include "core/model/model_config.h"
#include "core/train/run_manifest.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace es::train {

struct TrainerImpl;  // trainer_impl.h, for tests and benchmarks

struct TrainerOptions {
  model::ModelConfig model;
  TrainConfig train;
  std::uint64_t seed = 1234;      // the run's seed: identical initial weights on every peer
  std::uint64_t dataSeed = 1234;  // batch order (a peer's own data stream)
  std::vector<int> localExperts;  // expert indices trained here (same index in every layer);
                                  // empty = all experts (centralised training)
  std::string device = "cpu";     // "cpu", "cuda", "cuda:N" or "auto" (CUDA when available)
  // "f32", "bf16" (autocast: bf16 compute, f32 master weights, gradients and moments; any device)
  // or "auto": bf16 on a GPU, f32 on the CPU (whose bf16 matmuls are slow without AMX).
  std::string precision = "auto";
};

struct StepStats {
  std::int64_t step = 0;   // steps completed after this one
  double loss = 0;         // cross-entropy of this batch
  double loadBalance = 0;  // load-balancing loss (mean over layers)
  double zLoss = 0;
  double lr = 0;
  double gradNorm = 0;      // before clipping
  std::int64_t tokens = 0;  // tokens in this batch
  double seconds = 0;       // wall time of this step
};

class Trainer {
 public:
  // Fails on an invalid config or expert list (out of range, duplicates).
  static Expected<std::unique_ptr<Trainer>> create(const TrainerOptions& options,
                                                   std::shared_ptr<const std::vector<std::uint16_t>> trainTokens,
                                                   std::shared_ptr<const std::vector<std::uint16_t>> valTokens);
  ~Trainer();

  StepStats trainStep();
  double evaluate();  // mean cross-entropy over the fixed validation slice
  // Training batches from now on come from `tokens` (a peer's shards of a prepared run moved on:
  // core/train/shard_assignment.h); the step and data seed are kept. At least one window.
  Status setTrainTokens(std::shared_ptr<const std::vector<std::uint16_t>> tokens);

  std::int64_t step() const;
  const TrainerOptions& options() const;
  std::vector<int> localExperts() const;  // sorted; all experts when none were given
  std::vector<std::string> trainableTensorNames() const;
  std::int64_t optimizerStateBytes() const;
  std::string deviceName() const;  // the device actually used, e.g. "cpu" or "cuda:0"

  // Full training state (training_state.h), atomically. Loading checks the model config and
  // keeps moments only for tensors trainable now (a changed claim starts its moments at zero).
  Status saveState(const std::string& path) const;
  Status loadState(const std::string& path);
  // Weights only, with the model config in the metadata (export / inspection).
  Status saveWeights(const std::string& path) const;

  TrainerImpl& impl() { return *impl_; }

 private:
  explicit Trainer(std::unique_ptr<TrainerImpl> impl);
  std::unique_ptr<TrainerImpl> impl_;
};

// Whether `device` ("auto", "cpu", "cuda", "cuda:N") can be used by a Trainer here.
Status checkDevice(const std::string& device);
// The device a Trainer would use for `device`: "auto" becomes "cuda" or "cpu"; others unchanged.
std::string resolvedDevice(const std::string& device);

// Process-wide LibTorch settings for training: thread count (0 = all cores) and glibc malloc
// tuned so the large per-step buffers are not returned to the OS every step (~1.8x on CPU,
// docs/PERFORMANCE.md). Call once, early.
void configureTrainingRuntime(int threads);

}  // namespace es::train
