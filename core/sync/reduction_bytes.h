// Issue 38's byte model and the switch it decides (item 5): per-peer bytes a round moves for N
// peers when every peer fetches every other's contribution (all-to-all) against the sharded,
// replicated reduction — each shard reduced by R peers that fetch it from every contributor,
// every other peer fetching the merged shard (float32: the merged state must be bit-identical,
// so its values travel whole), and each peer's audit of A random shards it does not reduce (it
// fetches them from every contributor, as a reducer does). Sizes are the files' exact bytes
// (contributionBytes, shardFileBytes), int8 contributions. Not modelled: BitTorrent's swarming
// (sent bytes are the star case, each transfer uploaded by its source alone), record gossip, the
// DHT. bench/reduction_scale prints it for 4–256 peers.
//
// The switch: a round is sharded when its busiest peer receives fewer bytes so than all-to-all
// (shardingPays) — from the model and the number of peers alone, so every peer decides alike and
// a bigger model shards later (the default model from 15 peers, gpu-1b from 35: tst_round_topology,
// bench/reduction_scale). Deciding costs ~0.3 s at 256 peers on one core here (the trainer
// thread's, after each merge), milliseconds at 16.
// Received, not sent: what a peer sends under the star case is what BitTorrent's swarming spreads.
#pragma once

#include "core/model/model_config.h"

#include <cstdint>
#include <set>
#include <vector>

namespace es::sync {

struct PeerBytes {
  std::vector<std::int64_t> received, sent;  // per peer, one round
  explicit PeerBytes(int peers) : received(std::size_t(peers), 0), sent(std::size_t(peers), 0) {}
  std::int64_t mostReceived() const;
  std::int64_t mostSent() const;
  double meanReceived() const;
};

// SPES's claims: with fewer peers than experts each takes every N-th expert; with more, each
// expert has N / E owners.
std::vector<std::set<int>> evenClaims(int peers, int experts);

PeerBytes allToAllBytes(const model::ModelConfig& config, const std::vector<std::set<int>>& claims);

// `shardCount`, when given, gets the plan's shard count.
PeerBytes shardedBytes(const model::ModelConfig& config, const std::vector<std::set<int>>& claims, int replicas,
                       int audits, std::size_t* shardCount = nullptr);

// Whether `peers` peers, claiming evenly, receive fewer bytes at the busiest peer sharded than
// all-to-all. Never with `peers` ≤ `replicas` (every peer would reduce every shard).
bool shardingPays(const model::ModelConfig& config, int peers, int replicas, int audits);

}  // namespace es::sync
