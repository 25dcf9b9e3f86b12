#include "core/train/shard_assignment.h"

#include "core/train/prepared_run.h"

#include <algorithm>
#include <numeric>

namespace es::train {
namespace {

// FNV-1a and splitmix64: written out because the score must be the same on every machine and
// build (std::hash is not), and it only spreads shards — nothing trusts it.
std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<int> assignShards(const std::string& peerId, const std::string& runId, std::int64_t epoch,
                              const std::vector<std::int64_t>& shardTokens, std::int64_t budgetBytes) {
  std::vector<int> order(shardTokens.size());
  std::iota(order.begin(), order.end(), 0);
  if (budgetBytes <= 0) return order;
  const std::uint64_t key = splitmix(fnv1a(peerId) ^ splitmix(fnv1a(runId) + std::uint64_t(epoch)));
  std::vector<std::uint64_t> score(shardTokens.size());
  for (std::size_t i = 0; i < score.size(); ++i) score[i] = splitmix(key ^ splitmix(std::uint64_t(i)));
  std::sort(order.begin(), order.end(), [&](int a, int b) { return score[std::size_t(a)] > score[std::size_t(b)]; });
  std::vector<int> held;
  std::int64_t bytes = 0;
  for (const int i : order) {
    const std::int64_t size = tokenShardBytes(shardTokens[std::size_t(i)]);
    if (!held.empty() && bytes + size > budgetBytes) continue;  // a smaller one further down may fit
    held.push_back(i);
    bytes += size;
  }
  std::sort(held.begin(), held.end());
  return held;
}

}  // namespace es::train
