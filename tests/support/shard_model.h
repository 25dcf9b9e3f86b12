// A model small enough for a unit test yet cut by rows at a shard of 3,000 elements (its
// embedding and output are 256 × 32): the shape the shard tests (tst_shard_file,
// tst_shard_reduce) plan over.
#pragma once

#include "core/model/model_config.h"

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

}  // namespace es::test
