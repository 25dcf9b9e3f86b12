// Which training shards of a prepared run a peer holds (issue 40): as many as its disk budget
// allows, chosen by rendezvous hashing of (peer id, run id, epoch, shard) — every peer computes
// its own set alone, the same on every start, and across many peers every shard is held by about
// peers × budget / corpus of them, so the swarm covers the corpus without agreeing on anything.
// The epoch is there to move a peer on to other shards once it has trained through its set (not
// wired yet: every peer stays in epoch 0).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace es::train {

// Indices (ascending) of the shards `peerId` holds: shards by descending hash score while their
// bytes (token_shard.h sizes) fit `budgetBytes`; at least the first one even if it alone is over
// the budget (a peer must train on something). budgetBytes <= 0: every shard.
std::vector<int> assignShards(const std::string& peerId, const std::string& runId, std::int64_t epoch,
                              const std::vector<std::int64_t>& shardTokens, std::int64_t budgetBytes);

}  // namespace es::train
