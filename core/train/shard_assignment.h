// Which training shards of a prepared run a peer holds (issue 40): as many as its disk budget
// allows. Each peer orders all shards by a hash of (peer id, run id, shard) — its own permutation,
// the same on every start — and epoch e holds the next window of that order that fits the budget,
// the windows following each other around it. So one peer trains on every shard once per
// corpus / budget epochs, and at any moment different peers hold different windows: the swarm
// covers the corpus without agreeing on anything. An epoch is one pass over the window's tokens
// (epochAtStep).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace es::train {

// Indices (ascending) of the shards `peerId` holds in `epoch`: consecutive shards of its order,
// from where epoch − 1's window ended, while their bytes (token_shard.h sizes) fit `budgetBytes`,
// at least one even if it alone is over the budget (a peer must train on something).
// budgetBytes <= 0 or a budget that holds them all: every shard, in every epoch.
std::vector<int> assignShards(const std::string& peerId, const std::string& runId, std::int64_t epoch,
                              const std::vector<std::int64_t>& shardTokens, std::int64_t budgetBytes);

// The epoch a peer that has trained `tokensTrained` tokens is in: each epoch lasts as many tokens
// as its window holds. Capped at `maxEpoch` (a bound on the walk, which is linear in the epoch).
std::int64_t epochAtTokens(const std::string& peerId, const std::string& runId,
                           const std::vector<std::int64_t>& shardTokens, std::int64_t budgetBytes,
                           std::int64_t tokensTrained, std::int64_t maxEpoch = 100000);

// The tokens a peer has trained when `epoch` ends (its windows 0..epoch together): below it,
// epochAtTokens says `epoch` or less. The largest int64 when every shard is held (no epoch ends).
// What ShardRotation checks each step instead of walking the epochs again.
std::int64_t tokensAtEpochEnd(const std::string& peerId, const std::string& runId,
                              const std::vector<std::int64_t>& shardTokens, std::int64_t budgetBytes,
                              std::int64_t epoch);

}  // namespace es::train
