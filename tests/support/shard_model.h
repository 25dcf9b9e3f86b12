// A model small enough for a unit test yet cut by rows at a shard of 3,000 elements (its
// embedding and output are 256 × 32), and a sender's random deltas over it: what the shard tests
// (tst_shard_file, tst_shard_reduce, tst_shard_figures, tst_swarm_shard_fetch) plan over.
// Include it inside the tests' `#ifndef Q_MOC_RUN` (it brings LibTorch).
#pragma once

#include "core/model/model_config.h"
#include "core/model/tensor_names.h"
#include "core/sync/fetch_size.h"

#include <torch/torch.h>

#include <cstdint>
#include <set>

namespace es::test {

inline model::ModelConfig shardTestModel() {
  model::ModelConfig c;
  c.vocabSize = 256;
  c.dModel = 32;
  c.nLayers = 2;
  c.nHeads = 2;
  c.nExperts = 4;
  c.expertHidden = 16;
  c.seqLen = 32;
  return c;
}

// N(0, 0.01²) deltas for every shared tensor of `config` and every tensor of `experts`.
inline ckpt::NamedTensors senderDeltas(const model::ModelConfig& config, const std::set<int>& experts,
                                       std::uint64_t seed) {
  torch::manual_seed(seed);
  ckpt::NamedTensors out;
  for (const auto& t : sync::modelTensors(config)) {
    const auto expert = model::expertOf(t.name);
    if (expert && !experts.count(expert->expert)) continue;
    out.emplace_back(t.name, torch::randn(t.shape) * 0.01f);
  }
  return out;
}

}  // namespace es::test
