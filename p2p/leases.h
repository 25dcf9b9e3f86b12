// Expert leases: who owns which expert in a round, and which experts a peer should claim.
// Pure, deterministic functions of the valid records, so every peer that holds the same records
// computes the same map — there is no coordinator to disagree with.
#pragma once

#include "p2p/peer_record.h"

#include <cstdint>
#include <set>
#include <vector>

namespace es::p2p {

// owners[e] = the public keys (sorted) whose records claim expert e with a lease that holds at
// `round` (es::leaseHolds, core/common/lease_terms.h: not expired, and no longer than the record's
// round + leaseRounds + one round of slack — an endless lease owns nothing). Claims outside
// [0, nExperts) are ignored.
struct OwnershipMap {
  std::vector<std::vector<PublicKey>> owners;
  int ownerCount(int expert) const { return static_cast<int>(owners.at(static_cast<std::size_t>(expert)).size()); }
  bool operator==(const OwnershipMap& o) const { return owners == o.owners; }
};
OwnershipMap ownershipMap(const std::vector<PeerRecord>& records, std::int64_t round, int nExperts, int leaseRounds);

// The experts `self` should claim for `round`: `count` distinct experts (capped at nExperts),
// fewest live owners first (self's own record is ignored, so re-claiming is stable), ties broken
// by BLAKE2b(pk ‖ expert as 4 bytes big-endian) ascending — different peers prefer different
// experts, yet everyone can recompute the choice. Records of `excluded` keys (peers the caller
// banned or found silent) own nothing, so their experts are free to take. Result sorted ascending.
std::vector<int> chooseClaims(const std::vector<PeerRecord>& records, const PublicKey& self, std::int64_t round,
                              int nExperts, int count, int leaseRounds, const std::set<PublicKey>& excluded = {});

// How many experts fit: floor(freeBytes / bytesPerExpert), at least `minimum`, at most nExperts.
int claimBudget(std::int64_t freeBytes, std::int64_t bytesPerExpert, int minimum, int nExperts);

}  // namespace es::p2p
