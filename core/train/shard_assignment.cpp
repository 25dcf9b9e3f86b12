#include "core/train/shard_assignment.h"

#include "core/train/prepared_run.h"

#include <algorithm>
#include <limits>
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

namespace {

// The peer's order of all shards: by descending hash score.
std::vector<int> shardOrder(const std::string& peerId, const std::string& runId, std::size_t count) {
  const std::uint64_t key = splitmix(fnv1a(peerId) ^ splitmix(fnv1a(runId)));
  std::vector<std::uint64_t> score(count);
  for (std::size_t i = 0; i < count; ++i) score[i] = splitmix(key ^ splitmix(std::uint64_t(i)));
  std::vector<int> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return score[std::size_t(a)] > score[std::size_t(b)]; });
  return order;
}

// The window of `order` from `start` that fits the budget: how many shards (at least one).
std::size_t windowLength(const std::vector<int>& order, std::size_t start, const std::vector<std::int64_t>& tokens,
                         std::int64_t budgetBytes) {
  std::size_t length = 0;
  std::int64_t bytes = 0;
  while (length < order.size()) {
    const std::int64_t size = tokenShardBytes(tokens[std::size_t(order[(start + length) % order.size()])]);
    if (length > 0 && bytes + size > budgetBytes) break;
    bytes += size;
    ++length;
  }
  return length;
}

bool holdsAll(const std::vector<std::int64_t>& tokens, std::int64_t budgetBytes) {
  std::int64_t all = 0;
  for (const auto t : tokens) all += tokenShardBytes(t);
  return budgetBytes <= 0 || all <= budgetBytes;
}

}  // namespace

std::vector<int> assignShards(const std::string& peerId, const std::string& runId, std::int64_t epoch,
                              const std::vector<std::int64_t>& shardTokens, std::int64_t budgetBytes) {
  std::vector<int> all(shardTokens.size());
  std::iota(all.begin(), all.end(), 0);
  if (shardTokens.empty() || holdsAll(shardTokens, budgetBytes)) return all;
  const auto order = shardOrder(peerId, runId, shardTokens.size());
  std::size_t start = 0;
  for (std::int64_t e = 0; e < epoch; ++e)
    start = (start + windowLength(order, start, shardTokens, budgetBytes)) % order.size();
  std::vector<int> held;
  for (std::size_t k = 0, n = windowLength(order, start, shardTokens, budgetBytes); k < n; ++k)
    held.push_back(order[(start + k) % order.size()]);
  std::sort(held.begin(), held.end());
  return held;
}

namespace {

// Walks a peer's epochs from 0, handing each one's window tokens to `visit` until it says stop or
// maxEpoch is reached; → the epoch it stopped at.
template <class Visit>
std::int64_t walkEpochs(const std::string& peerId, const std::string& runId,
                        const std::vector<std::int64_t>& shardTokens, std::int64_t budgetBytes, std::int64_t maxEpoch,
                        Visit visit) {
  const auto order = shardOrder(peerId, runId, shardTokens.size());
  std::size_t start = 0;
  std::int64_t epoch = 0;
  for (; epoch < maxEpoch; ++epoch) {
    const std::size_t n = windowLength(order, start, shardTokens, budgetBytes);
    std::int64_t tokens = 0;
    for (std::size_t k = 0; k < n; ++k) tokens += shardTokens[std::size_t(order[(start + k) % order.size()])];
    if (!visit(epoch, tokens)) break;
    start = (start + n) % order.size();
  }
  return epoch;
}

}  // namespace

std::int64_t epochAtTokens(const std::string& peerId, const std::string& runId,
                           const std::vector<std::int64_t>& shardTokens, std::int64_t budgetBytes,
                           std::int64_t tokensTrained, std::int64_t maxEpoch) {
  if (shardTokens.empty() || holdsAll(shardTokens, budgetBytes)) return 0;
  return walkEpochs(peerId, runId, shardTokens, budgetBytes, maxEpoch, [&](std::int64_t, std::int64_t tokens) {
    if (tokensTrained < tokens) return false;
    tokensTrained -= tokens;
    return true;
  });
}

std::int64_t tokensAtEpochEnd(const std::string& peerId, const std::string& runId,
                              const std::vector<std::int64_t>& shardTokens, std::int64_t budgetBytes,
                              std::int64_t epoch) {
  if (shardTokens.empty() || holdsAll(shardTokens, budgetBytes)) return std::numeric_limits<std::int64_t>::max();
  std::int64_t sum = 0;
  walkEpochs(peerId, runId, shardTokens, budgetBytes, epoch + 1, [&](std::int64_t, std::int64_t tokens) {
    sum += tokens;
    return true;
  });
  return sum;
}

}  // namespace es::train
