// Issue 38, protocol steps 3, 5 and 6: what a peer accepts when it fetches a sharded round's
// content, before a single piece moves (the swarm layer shows the metadata to FetchLimits):
//   - a sender's contribution folder must list exactly the files its claims and the plan predict
//     (sync::contributionFolderFiles: each carried shard and the figures file, exact sizes), and of
//     it the peer fetches the figures file and the files of the shards it reduces or audits
//     (v2: each file has its own merkle root, so the rest is never asked for);
//   - a merged shard is the one file of its name, of one of the sizes its input set allows
//     (sync::mergedShardSizes);
//   - a reducer's index is the one file of its name, within the plan's bound (reducer_index.h).
// A folder that breaks them is refused whole, and its sender is at fault. A contribution's limits
// carry in maxBytes the bytes of the files fetched (a folder's rule is what the swarm layer
// checks; the maxBytes is what RunFolder's quota counts).
#pragma once

#include "core/node/swarm.h"
#include "core/sync/contribution_header.h"
#include "core/sync/shard_plan.h"

#include <set>
#include <string>
#include <vector>

namespace es::sync {
struct MergedShardKey;
}

namespace es::node {

FetchLimits shardedContributionLimits(const std::vector<sync::Shard>& plan, const std::set<int>& claims,
                                      const sync::ContributionHeader& header,
                                      const std::set<std::string>& wantedShards);

FetchLimits mergedShardLimits(const sync::Shard& shard, const sync::MergedShardKey& key,
                              const std::set<std::string>& inputSenders);

FetchLimits reducerIndexLimits(std::int64_t round, std::size_t planShards);

}  // namespace es::node
