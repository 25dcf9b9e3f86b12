// Issue 38, protocol step 5: a reducer's index of one sharded round — for each shard it reduced,
// the digest of the input set it reduced and the content id of the merged shard it seeds
// (core/sync/merged_shard_file.h). One small file per reducer and round, published as its own
// torrent and named in the reducer's record (`outputs[round]`, p2p/peer_record.h): a record has
// room for one info-hash a round, not one a shard (17–65 for 16–64 peers). The record's
// signature covers the index's info-hash, so the index is the reducer's signed word on every
// output it lists — what shard_outputs.h's decideShard compares and outputLiars cites.
//
// Compact JSON (Qt's writer: keys sorted, no spaces), one spelling only — a file is refused
// unless writing what was read gives its bytes back:
//   {"base":"<base hash>","format":"expertswarm-reducer-index","outputs":[["<shard>","<inputs>",
//    "<content id>"],…],"reducer":"<peer id>","round":<round>,"run":"<run id>"}
// Outputs in plan order, each shard once, only shards of the plan.
#pragma once

#include "core/common/expected.h"
#include "core/common/ids.h"
#include "core/node/rules/shard_outputs.h"

#include <QByteArray>

#include <cstdint>
#include <string>
#include <vector>

namespace es::node {

inline const std::string kReducerIndexFormat = "expertswarm-reducer-index";

// What names an index: the round it reduced, on which state, by whom.
struct ReducerIndexKey {
  std::string run;
  std::int64_t round = 0;
  std::string baseHash;  // the state the round's contributions were built on
  PeerId reducer;
};

struct ReducedOutput {
  std::string shard;   // the plan's shard id
  std::string inputs;  // the input set's digest (shard_refusals.h's inputDigest)
  ContentId output;    // the merged shard's content id

  bool operator==(const ReducedOutput& o) const { return shard == o.shard && inputs == o.inputs && output == o.output; }
};

struct ReducerIndex {
  ReducerIndexKey key;
  std::vector<ReducedOutput> outputs;  // plan order
};

// "outputs-<round>.json".
std::string reducerIndexFileName(std::int64_t round);

// The most bytes an index of a plan of `shards` shards can have: what a fetch accepts.
std::int64_t reducerIndexMaxBytes(std::size_t shards);

// The file's bytes; fails on outputs out of `planShards`' order, repeated, or not in it.
Expected<QByteArray> reducerIndexBytes(const ReducerIndex& index, const std::vector<std::string>& planShards);

// Writes it atomically (core/common/atomic_file.h).
Status saveReducerIndex(const std::string& path, const ReducerIndex& index, const std::vector<std::string>& planShards);

// Reads one strictly: exactly `key`, the format above byte for byte, at most
// reducerIndexMaxBytes, digests of 16 lower-case hex digits, content ids of 40 or 64.
Expected<ReducerIndex> loadReducerIndex(const std::string& path, const ReducerIndexKey& key,
                                        const std::vector<std::string>& planShards);

// The index as shard_outputs.h's rule hears it: one ShardOutput per listed shard.
std::vector<std::pair<std::string, ShardOutput>> shardOutputsOf(const ReducerIndex& index);

}  // namespace es::node
