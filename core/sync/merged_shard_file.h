// Issue 38, protocol step 5: what a reducer publishes for one shard it reduced — the merged rows
// (shard_reduce.h's reduceShard: float32, before the outer step, which every peer takes itself),
// the input set they came from, the senders it refused in this shard, and for a shared shard its
// part of the work credit (work_credit.h's shardAgreement, one Σd·u and Σd·d per sender in the
// order given, and the update's Σu·u). Nothing in it names the reducer: honest reducers of one
// shard write the same bytes, so its single-file torrent has one info-hash and they seed one swarm
// that every peer downloads from at once; the reducer's signature is its record naming that hash.
//
// A safetensors file: each piece a float32 tensor "<tensor>@<first row>" [rows, last dim] (as a
// shard file's, shard_file.h), metadata format "expertswarm-merged-shard" with run, round,
// base_hash, shard, inputs (the set's digest), refused and senders (comma-separated ids), credit
// ("<Σu·u>;<Σd·u>/<Σd·d>,…" as hex_bits.h's 16 digits, one pair per sender; empty for an
// expert's shard).
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/common/expected.h"
#include "core/sync/shard_plan.h"
#include "core/sync/work_credit.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace es::sync {

inline const std::string kMergedShardFormat = "expertswarm-merged-shard";

// What names the output: the round it merges and the set it merged, for one shard.
struct MergedShardKey {
  std::string run;
  std::int64_t round = 0;
  std::string baseHash;
  std::string shard;
  std::string inputs;  // the input set's digest (node/rules/shard_refusals.h's inputDigest)
};

struct MergedShard {
  MergedShardKey key;
  std::set<std::string> refused;         // senders refused in this shard
  std::vector<std::string> senders;      // whose credit parts follow, in that order (a shared shard)
  std::optional<ShardAgreement> credit;  // a shared shard's part of the work credit
  ckpt::NamedTensors rows;               // the merged rows, plain tensor names, plan order
};

// "merged-<round>-<shard>.safetensors".
std::string mergedShardFileName(std::int64_t round, const std::string& shard);

// Writes it (atomically); its rows must be the shard's (reduceShard's order and shapes), float32.
Status saveMergedShard(const std::string& path, const Shard& shard, const MergedShard& merged);

// Every size its file can have for the input set's senders that carry the shard (sorted): one per
// count of refused senders (which ones it refused does not change the size; the tensors are the
// plan's). What a fetch of an output accepts (FetchLimits::sizes).
std::vector<std::int64_t> mergedShardSizes(const Shard& shard, const MergedShardKey& key,
                                           const std::set<std::string>& inputSenders);

// Reads one strictly: exactly `key`, exactly the shard's pieces in float32 with the plan's shapes,
// senders and refused each unique names that are disjoint and together exactly `inputSenders`
// (the input set's senders that carry the shard), a credit part for every sender of a shared
// shard and none for an expert's, every number finite and every sum of squares not negative.
Expected<MergedShard> loadMergedShard(const std::string& path, const MergedShardKey& key, const Shard& shard,
                                      const std::set<std::string>& inputSenders);

}  // namespace es::sync
