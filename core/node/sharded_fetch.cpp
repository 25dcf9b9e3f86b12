#include "core/node/sharded_fetch.h"

#include "core/node/reducer_index.h"
#include "core/sync/fetch_size.h"
#include "core/sync/merged_shard_file.h"
#include "core/sync/shard_figures_file.h"
#include "core/sync/shard_file.h"

#include <algorithm>

namespace es::node {

FetchLimits shardedContributionLimits(const std::vector<sync::Shard>& plan, const std::set<int>& claims,
                                      const sync::ContributionHeader& header,
                                      const std::set<std::string>& wantedShards) {
  const auto expected = sync::contributionFolderFiles(plan, claims, header);  // sorted by name
  std::set<std::string> wanted{sync::kFiguresFileName};
  for (const auto& shard : plan)
    if (wantedShards.count(shard.id) && sync::carriesShard(shard, claims)) wanted.insert(sync::shardFileName(shard));
  FetchLimits limits;
  for (const auto& [name, bytes] : expected)
    if (wanted.count(name)) limits.maxBytes += bytes;  // what the fetch brings: the quota counts it
  limits.folder = [expected](const std::string&, const FetchLimits::FolderFiles& files) -> std::string {
    if (expected.empty()) return "no sharded contribution of this header can be written";
    auto listed = files;
    std::sort(listed.begin(), listed.end());
    if (listed == expected) return {};
    return "a folder of " + std::to_string(files.size()) + " files, not the " + std::to_string(expected.size()) +
           " its sender's claimed experts predict (names and sizes)";
  };
  limits.folderWanted = [wanted](const FetchLimits::FolderFiles&) { return wanted; };
  return limits;
}

FetchLimits mergedShardLimits(const sync::Shard& shard, const sync::MergedShardKey& key,
                              const std::set<std::string>& inputSenders) {
  FetchLimits limits;
  limits.sizes = sync::mergedShardSizes(shard, key, inputSenders);
  limits.name = sync::mergedShardFileName(key.round, shard.id);
  return limits;
}

FetchLimits reducerIndexLimits(std::int64_t round, std::size_t planShards) {
  FetchLimits limits;
  limits.maxBytes = reducerIndexMaxBytes(planShards);
  limits.name = reducerIndexFileName(round);
  return limits;
}

}  // namespace es::node
