#include "core/node/rules/audit_draw.h"

#include <algorithm>
#include <random>

namespace es::node {

std::vector<std::size_t> drawAudits(std::size_t shards, const std::set<std::size_t>& reduced, int audits,
                                    std::uint64_t entropy) {
  std::vector<std::size_t> candidates;
  for (std::size_t s = 0; s < shards; ++s)
    if (!reduced.count(s)) candidates.push_back(s);
  const std::size_t wanted = std::min(candidates.size(), std::size_t(std::max(audits, 0)));
  std::mt19937_64 draw(entropy);
  // A partial Fisher-Yates shuffle: the first `wanted` are a uniform sample without replacement.
  for (std::size_t k = 0; k < wanted; ++k) {
    std::uniform_int_distribution<std::size_t> pick(k, candidates.size() - 1);
    std::swap(candidates[k], candidates[pick(draw)]);
  }
  candidates.resize(wanted);
  std::sort(candidates.begin(), candidates.end());
  return candidates;
}

}  // namespace es::node
