// A run's manifest (run.json): everything peers of one run must agree on — the model, the
// optimizer and schedule, the data recipe, the seed, and (opaque here) the swarm policy.
#pragma once

#include "core/common/expected.h"
#include "core/model/model_config.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace es::train {

struct TrainConfig {
  int batchSize = 8;            // sequences per step (each seq_len tokens)
  double lr = 2e-3;             // peak learning rate
  double minLrRatio = 0.1;      // cosine floor as a fraction of lr
  std::int64_t warmupSteps = 50;
  std::int64_t totalSteps = 5000;  // length of the cosine schedule and of SPES's 20% ramp
  double weightDecay = 0.1;     // on matrices only, never on norm weights
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double gradClip = 1.0;
  double loadBalanceCoef = 0.01;
  double zLossCoef = 0.001;
  int logInterval = 10;
  int evalInterval = 100;
  int evalBatches = 8;          // validation slice = the first eval_batches·batch_size windows
  int checkpointInterval = 100; // steps between durable training-state saves
};

struct DataConfig {
  std::vector<std::string> trainCorpus;  // text files, relative to the run's source folder
  std::string valCorpus;
  std::int64_t shardTokens = 1 << 20;    // tokens per train-NNN.bin shard
};

struct RunManifest {
  std::string name;
  std::uint64_t seed = 1234;
  model::ModelConfig model;
  TrainConfig train;
  DataConfig data;
  std::string swarmJson = "{}";  // the "swarm" object, interpreted by the node
};

// Strict: unknown keys, wrong types and out-of-range values are errors naming the key.
Expected<RunManifest> parseRunManifest(std::string_view json);
Expected<RunManifest> loadRunManifest(const std::string& path);

// Learning rate at `step` (0-based): linear warmup to lr, then cosine down to lr·minLrRatio at
// totalSteps, flat afterwards.
double learningRateAt(const TrainConfig& config, std::int64_t step);

// SPES: the load-balancing weight of a peer's local experts ramps linearly from 0.7 to 1.0 over
// the first 20% of the run's steps (reference: zjr2000/SPES), 1.0 after.
double localExpertBalanceFactor(std::int64_t step, std::int64_t totalSteps);

}  // namespace es::train
