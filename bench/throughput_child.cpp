#include "bench/throughput_child.h"

#include "bench/throughput_util.h"
#include "core/gpu/nvml_telemetry.h"
#include "core/train/corpus_prep.h"
#include "core/train/trainer.h"
#include "core/train/trainer_impl.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace es::bench {

Expected<std::unique_ptr<train::Trainer>> makeBenchTrainer(const ChildOptions& o) {
  auto data = train::loadRunData(o.runDir);
  if (!data) return makeError(data.error());
  train::TrainerOptions options;
  options.model = data->manifest.model;
  options.train = data->manifest.train;
  if (!applyModelPreset(o.model, options.model, options.train.batchSize))
    return makeError("no model preset \"" + o.model + "\"");
  model::ExpertDispatch dispatch{};
  if (!parseExpertDispatch(o.dispatch, dispatch)) return makeError("no expert dispatch \"" + o.dispatch + "\"");
  if (dispatch == model::ExpertDispatch::Grouped && !model::groupedExpertsAvailable())
    return makeError("--dispatch grouped needs LibTorch >= 2.9 (at::_grouped_mm)");
  options.seed = data->manifest.seed;
  options.dataSeed = data->manifest.seed;
  options.localExperts = o.localExperts;
  options.device = o.device;
  auto trainer = train::Trainer::create(options, data->train, data->val);
  if (!trainer) return makeError(trainer.error());
  (*trainer)->impl().model->setExpertDispatch(dispatch);
  return std::move(*trainer);
}

int runTrainingChild(const ChildOptions& o) {
  auto trainer = makeBenchTrainer(o);
  if (!trainer) {
    std::fprintf(stderr, "train_throughput: %s\n", trainer.error().c_str());
    return 1;
  }
  // Libraries, corpus, weights and optimizer moments; the peak adds activations and gradients.
  const std::int64_t rssAfterSetup = peakRssBytes();
  std::int64_t parameters = 0;
  for (const auto& p : (*trainer)->impl().model->parameters()) parameters += p.numel();

  // Warm-up steps are excluded: the first steps fault in every buffer and allocator arena.
  train::StepStats last;
  for (int i = 0; i < o.warmupSteps; ++i) last = (*trainer)->trainStep();
  std::vector<double> stepSeconds;
  std::int64_t tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.timedSteps; ++i) {
    last = (*trainer)->trainStep();
    stepSeconds.push_back(last.seconds);
    tokens += last.tokens;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::sort(stepSeconds.begin(), stepSeconds.end());
  const double median = stepSeconds.empty() ? 0.0 : stepSeconds[stepSeconds.size() / 2];

  std::printf("tokens_per_s: %.1f tok/s\n", seconds > 0 ? double(tokens) / seconds : 0.0);
  std::printf("step_ms_median: %.1f ms\n", 1e3 * median);
  std::printf("step_ms_min: %.1f ms\n", stepSeconds.empty() ? 0.0 : 1e3 * stepSeconds.front());
  std::printf("peak_rss_bytes: %lld B\n", static_cast<long long>(peakRssBytes()));
  std::printf("rss_after_setup_bytes: %lld B\n", static_cast<long long>(rssAfterSetup));
  std::printf("optimizer_state_bytes: %lld B\n", static_cast<long long>((*trainer)->optimizerStateBytes()));
  std::printf("parameters: %lld\n", static_cast<long long>(parameters));
  // On a GPU the saving of frozen experts is in its memory, not the RSS: the driver's count of
  // what this process (the only one on the device) holds, the allocator's cache included.
  if (const int index = gpu::cudaIndexOf(o.device); index >= 0)
    if (auto nvml = gpu::NvmlTelemetry::open())
      if (auto sample = (*nvml)->sample(index))
        std::printf("gpu_memory_used_bytes: %lld B\n", static_cast<long long>(sample->memoryUsedBytes));
  std::printf("loss_last: %.4f\n", last.loss);
  return 0;
}

}  // namespace es::bench
