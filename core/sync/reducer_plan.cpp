#include "core/sync/reducer_plan.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

namespace es::sync {

std::vector<std::string> reducerCandidates(const WorkLedger& ledger) {
  std::int64_t latest = 0;
  for (const auto& [sender, entry] : ledger.entries()) latest = std::max(latest, entry.lastRound);
  std::vector<std::string> out;
  for (const auto& [sender, entry] : ledger.entries())
    if (ledger.weightOf(sender) > 0.0 && entry.lastRound + 1 >= latest) out.push_back(sender);
  return out;
}

std::uint64_t reducerRank(const std::string& seed, const std::string& shard, const std::string& peer) {
  std::uint64_t h = 1469598103934665603ull;
  auto add = [&h](const std::string& s) {
    for (const unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xffu) * 1099511628211ull;  // a separator no id contains
  };
  add(seed);
  add(shard);
  add(peer);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

std::vector<std::vector<std::string>> assignReducers(const std::vector<Shard>& shards,
                                                     const std::vector<std::string>& candidates,
                                                     const std::map<int, std::set<std::string>>& owners,
                                                     const std::string& seed, int replicas) {
  std::map<std::string, std::int64_t> load;  // elements each candidate reduces so far
  for (const auto& c : candidates) load[c] = 0;
  std::vector<std::vector<std::string>> out;
  for (const auto& shard : shards) {
    const auto ownersOf = shard.expert >= 0 ? owners.find(shard.expert) : owners.end();
    auto isOwner = [&](const std::string& c) { return ownersOf != owners.end() && ownersOf->second.count(c) > 0; };
    // The order: owners first (by rank), then by load, then by rank.
    std::vector<std::tuple<bool, std::int64_t, std::uint64_t, std::string>> order;
    for (const auto& c : candidates) order.emplace_back(!isOwner(c), load[c], reducerRank(seed, shard.id, c), c);
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) < std::get<0>(b);
      if (!std::get<0>(a)) return std::get<2>(a) < std::get<2>(b);  // owners: by rank alone
      return std::tie(std::get<1>(a), std::get<2>(a)) < std::tie(std::get<1>(b), std::get<2>(b));
    });
    std::vector<std::string> ranked;
    for (const auto& entry : order) ranked.push_back(std::get<3>(entry));
    for (int k = 0; k < replicas && k < static_cast<int>(ranked.size()); ++k) load[ranked[k]] += shard.elements();
    out.push_back(std::move(ranked));
  }
  return out;
}

}  // namespace es::sync
