// Training quality, shared by tests/tst_train_quality (Qt Test, Debian's LibTorch, CI) and
// tests/device/tst_train_quality (the torch-only build; on a GPU, bf16): 300 steps of the default
// run from a fresh start, measured. No Qt, no test framework: each test asserts on the figures.
#pragma once

#include "core/train/corpus_prep.h"
#include "core/train/trainer.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace es::test {

struct QualityRun {
  std::string error;  // the trainer could not be made
  double lnVocab = 0, initial = 0, final = 0, tokensPerSecond = 0;
  int firstNonFiniteStep = 0;  // 0: every step's loss was finite
};

// Observed: 8.34 → 5.25 (step 100) → 4.80 (200) → 4.49 (300) at one thread (docs/PERFORMANCE.md).
// The acceptance is 300 steps below 5.0 (the device test, and the CPU test with
// ES_QUALITY_STEPS=300); CI's CPU test stops at 100 steps below 5.6 — the same learning, in a third
// of its ~12 minutes of one core (CI's time budget: docs/PERFORMANCE.md, "CI time").
constexpr int kQualitySteps = 300;
inline double qualityThreshold(int steps) { return steps >= 300 ? 5.0 : steps >= 200 ? 5.3 : 5.6; }

inline QualityRun trainDefaultRun(const train::RunData& data, const std::string& device, int steps = kQualitySteps) {
  train::TrainerOptions options;
  options.model = data.manifest.model;
  options.train = data.manifest.train;
  options.seed = data.manifest.seed;
  options.dataSeed = data.manifest.seed;
  options.device = device;
  QualityRun run;
  auto created = train::Trainer::create(options, data.train, data.val);
  if (!created) {
    run.error = created.error();
    return run;
  }
  auto& trainer = **created;
  run.lnVocab = std::log(double(options.model.vocabSize));
  run.initial = trainer.evaluate();
  double seconds = 0;
  for (int i = 1; i <= steps; ++i) {
    const auto stats = trainer.trainStep();
    if (!std::isfinite(stats.loss) && !run.firstNonFiniteStep) run.firstNonFiniteStep = i;
    seconds += stats.seconds;
    if (i % 100 != 0) continue;
    const double val = trainer.evaluate();
    std::printf("step %d: train loss %.4f, val_loss %.4f\n", i, stats.loss, val);
    if (i == steps) run.final = val;  // the last step's evaluation, not a second one of the same state
  }
  run.tokensPerSecond = steps * double(options.train.batchSize) * options.model.seqLen / seconds;
  std::printf("val_loss: initial %.4f final %.4f (ln vocab %.4f), %.0f tok/s on %s\n", run.initial, run.final,
              run.lnVocab, run.tokensPerSecond, device.c_str());
  std::fflush(stdout);
  return run;
}

}  // namespace es::test
