#include "p2p/leases.h"

#include "core/common/lease_terms.h"

#include <sodium.h>

#include <algorithm>
#include <array>
#include <tuple>

namespace es::p2p {
namespace detail {
void ensureSodium();  // types.cpp
}

namespace {

// BLAKE2b-256(pk ‖ expert as 4 bytes big-endian): a per-peer pseudo-random order of the experts.
std::array<std::uint8_t, crypto_generichash_BYTES> tieBreak(const PublicKey& key, int expert) {
  std::array<std::uint8_t, 36> input{};
  std::copy(key.begin(), key.end(), input.begin());
  const auto e = static_cast<std::uint32_t>(expert);
  input[32] = static_cast<std::uint8_t>(e >> 24);
  input[33] = static_cast<std::uint8_t>(e >> 16);
  input[34] = static_cast<std::uint8_t>(e >> 8);
  input[35] = static_cast<std::uint8_t>(e);
  std::array<std::uint8_t, crypto_generichash_BYTES> digest{};
  crypto_generichash(digest.data(), digest.size(), input.data(), input.size(), nullptr, 0);
  return digest;
}

}  // namespace

OwnershipMap ownershipMap(const std::vector<PeerRecord>& records, std::int64_t round, int nExperts, int leaseRounds) {
  OwnershipMap map;
  map.owners.resize(static_cast<std::size_t>(std::max(nExperts, 0)));
  for (const PeerRecord& record : records) {
    // Expired, or longer than any honest lease: the expert is free.
    if (!es::leaseHolds(record.round, record.leaseUntil, round, leaseRounds)) continue;
    for (const int expert : record.claims) {
      if (expert >= 0 && expert < nExperts) map.owners[static_cast<std::size_t>(expert)].push_back(record.pk);
    }
  }
  // Sorting and deduplicating makes the map a function of the set of records, not of their order
  // (nor of a key appearing twice), so every peer computes the same one.
  for (auto& owners : map.owners) {
    std::sort(owners.begin(), owners.end());
    owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
  }
  return map;
}

std::vector<int> chooseClaims(const std::vector<PeerRecord>& records, const PublicKey& self, std::int64_t round,
                              int nExperts, int count, int leaseRounds, const std::set<PublicKey>& excluded) {
  count = std::min(count, nExperts);
  if (count <= 0) return {};
  detail::ensureSodium();
  std::vector<PeerRecord> others;
  others.reserve(records.size());
  for (const PeerRecord& record : records) {
    if (record.pk != self && !excluded.count(record.pk)) others.push_back(record);
  }
  const OwnershipMap map = ownershipMap(others, round, nExperts, leaseRounds);

  struct Candidate {
    int owners;
    std::array<std::uint8_t, crypto_generichash_BYTES> hash;
    int expert;
    bool operator<(const Candidate& o) const {
      return std::tie(owners, hash, expert) < std::tie(o.owners, o.hash, o.expert);
    }
  };
  std::vector<Candidate> candidates;
  candidates.reserve(static_cast<std::size_t>(nExperts));
  for (int e = 0; e < nExperts; ++e) candidates.push_back({map.ownerCount(e), tieBreak(self, e), e});
  std::partial_sort(candidates.begin(), candidates.begin() + count, candidates.end());

  std::vector<int> chosen;
  chosen.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) chosen.push_back(candidates[static_cast<std::size_t>(i)].expert);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

int claimBudget(std::int64_t freeBytes, std::int64_t bytesPerExpert, int minimum, int nExperts) {
  // A non-positive cost means memory is no constraint.
  const std::int64_t fit = bytesPerExpert <= 0 ? nExperts : std::max<std::int64_t>(freeBytes, 0) / bytesPerExpert;
  const std::int64_t budget = std::min<std::int64_t>(std::max<std::int64_t>(fit, minimum), nExperts);
  return static_cast<int>(std::max<std::int64_t>(budget, 0));
}

}  // namespace es::p2p
