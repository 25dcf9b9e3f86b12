// Issue 38, step 1: how a round's delta is cut into shards that different peers reduce (the
// design: docs/ARCHITECTURE.md, "Sharded reduction"). Pure functions of the model's
// shape and the number of reducers, so every peer cuts alike; no Torch.
//
// A shard is a list of pieces: whole tensors, or row ranges of one (the tensor viewed as
// [rows, last dim]). Each expert's tensors (every layer's w1, w3, w2) go in shards of their own —
// only its owners contribute to them — and the shared tensors, in name order, are packed into
// shards of at most `maxElements`, a larger tensor cut by rows. Why rows and not only whole
// tensors: a reducer receives its shard from every contributor, so a flat load per peer needs a
// shared shard of about (shared elements / peers) — at 64 peers smaller than the default model's
// embedding alone (1 M elements).
#pragma once

#include "core/checkpoint/safetensors_format.h"
#include "core/model/model_config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace es::sync {

struct ShardPiece {
  std::string tensor;
  std::int64_t rowBegin = 0, rowEnd = 0;  // rows of the tensor as [rows, last dim]
  std::int64_t columns = 0;               // its last dimension (1 for a vector)
  std::int64_t elements() const { return (rowEnd - rowBegin) * columns; }
};

struct Shard {
  std::string id;   // "shared-<k>" or "expert-<e>-<k>": unique, ordered as the plan
  int expert = -1;  // the expert whose owners contribute to it; -1: shared, everyone does
  std::vector<ShardPiece> pieces;
  std::int64_t elements() const;
};

// Every element of the model in exactly one shard. maxElements ≥ 1.
std::vector<Shard> planShards(const model::ModelConfig& config, std::int64_t maxElements);

// The same packing over any tensors (in the order given; planShards passes the shared ones by
// name): shards "<prefix>0", "<prefix>1", … of at most maxElements, a tensor cut by rows only where
// it does not fit. Centered clipping per shard (AggregatePolicy::clipShardElements) packs the
// base's shared tensors with it, so its groups are the reducers' shards.
std::vector<Shard> packShards(const std::vector<ckpt::TensorInfo>& tensors, std::int64_t maxElements,
                              const std::string& prefix = "shared-", int expert = -1);

// The shard size that gives each of `peers` reducers about `replicas` shared shards' worth of the
// shared tensors (shared elements × replicas / peers / replicas = shared / peers), never under
// `floorElements` (one small tensor need not be cut finer).
std::int64_t shardElementsFor(const model::ModelConfig& config, int peers, std::int64_t floorElements = 4096);

}  // namespace es::sync
