#include "core/node/rules/merged_set.h"

#include <cstdint>
#include <cstdio>
#include <vector>

namespace es::node {

std::string mergedSetDigest(const std::set<ContentId>& contents) {
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a 64 offset basis
  for (const auto& content : contents) {
    for (const char c : content.str() + "\n") {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ULL;  // FNV-1a 64 prime
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

namespace {

// Leaves out `left` more of `all` from index `from` on, testing each resulting set.
bool searchWithout(const std::vector<ContentId>& all, std::set<ContentId>& current, std::size_t from, int left,
                   const std::string& digest) {
  if (left == 0) return mergedSetDigest(current) == digest;
  for (std::size_t i = from; i < all.size(); ++i) {
    current.erase(all[i]);
    if (searchWithout(all, current, i + 1, left - 1, digest)) return true;
    current.insert(all[i]);
  }
  return false;
}

}  // namespace

std::optional<std::set<ContentId>> findMergedSet(const std::set<ContentId>& candidates, const std::string& digest,
                                                 int maxMissing) {
  if (candidates.size() > 64) return std::nullopt;
  const std::vector<ContentId> all(candidates.begin(), candidates.end());
  for (int missing = 0; missing <= maxMissing && missing < static_cast<int>(all.size()); ++missing) {
    std::set<ContentId> current = candidates;
    if (searchWithout(all, current, 0, missing, digest)) return current;
  }
  return std::nullopt;
}

}  // namespace es::node
