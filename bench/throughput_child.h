// The measuring side of bench/train_throughput: one training configuration in its own process,
// so that its peak RSS (getrusage) belongs to that configuration alone. Reports `name: value`
// lines on stdout for the parent to parse.
#pragma once

#include "core/common/expected.h"

#include <memory>
#include <string>
#include <vector>

namespace es::train {
class Trainer;
}

namespace es::bench {

struct ChildOptions {
  std::string runDir;             // prepared run (corpus_prep.h)
  std::vector<int> localExperts;  // empty = all experts trainable
  int warmupSteps = 3;
  int timedSteps = 25;
  std::string device = "cpu";
  std::string model = "default";  // applyModelPreset's name
  std::string dispatch = "auto";  // parseExpertDispatch's name
};

// Trains warmupSteps + timedSteps steps and prints tokens_per_s, step_ms_median, peak_rss_bytes,
// parameters and the last loss. Returns the process exit code.
int runTrainingChild(const ChildOptions& options);

// The trainer a bench measures (train_throughput's children, gpu_profile): the prepared run's data
// and training options, with the model preset, trainable experts and expert dispatch of `options`.
Expected<std::unique_ptr<train::Trainer>> makeBenchTrainer(const ChildOptions& options);

}  // namespace es::bench
