// The node's rules about other peers, as pure functions so every peer computes the same answer and
// tests can check each one alone: who is live (lease, silence), who wins a tie, how claims drift
// between rounds; how long a ban lasts is bans.h's. Node (node.cpp, node_claims.cpp, node_bans.cpp)
// applies them.
#pragma once

#include "core/node/rules/bans.h"
#include "core/node/swarm.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace es::node {

// A peer that claims experts and publishes no contribution for this many rounds in a row stops
// being live: its experts are dealt to the others (issue 15, item 2).
inline constexpr int kSilentRounds = 2;

// The tie-break key of a peer in a round: 64-bit FNV-1a over the round (8 bytes, little-endian)
// and the id, then the murmur3 finalizer (FNV-1a alone mixes its last bytes poorly). Not a
// cryptographic hash — core/ has no libsodium — but ids are hashes of public keys, so an attacker
// grinds keys blindly, and a key that ranks first in one round ranks anywhere in the next: no id
// wins every tie, as the smallest id did.
std::uint64_t roundRank(std::int64_t round, const PeerId& peer);
// a before b in `round`'s order: by roundRank, then id (a total order even on a hash collision).
bool ranksBefore(std::int64_t round, const PeerId& a, const PeerId& b);

// Claims something, and its lease holds at `round` (es::leaseHolds: expired and endless leases
// count for nothing).
bool holdsClaims(const SwarmPeer& peer, std::int64_t round, int leaseRounds);

// Silent at `round`: it has claims, it has claimed since round `claimingSince` (as this node first
// saw it) at least kSilentRounds rounds ago — a newcomer gets the same rounds to publish as anyone
// — and its record names no contribution for the last kSilentRounds rounds nor for `round` itself
// (so one that publishes again is live again at once, and its contribution is gathered).
bool silentAt(const SwarmPeer& peer, std::int64_t round, std::int64_t claimingSince);

// The peers live for `round`: claims with a lease that holds, no ban in force at nowMs, not
// silent. `claimingSince` (peer id → the round this node first saw it claiming) gains the peers
// met for the first time, at `round`.
std::vector<SwarmPeer> livePeersOf(const std::vector<SwarmPeer>& peers, std::int64_t round, int leaseRounds,
                                   const Bans& bans, std::int64_t nowMs, std::map<PeerId, std::int64_t>& claimingSince);

// The swarm's round as a joining peer judges leases: the median of the rounds of the peers that
// run (past round 1 or published a contribution; all peers if none does). A few records claiming
// a far-future round do not move it; peers still joining (round 0) do not pull it down. 0 with no peers.
std::int64_t swarmRound(const std::vector<SwarmPeer>& peers);

// Between rounds, claims drift toward an even split without a coordinator (docs/ARCHITECTURE.md,
// "Claims"). `live` are the other peers live for nextRound (banned and silent ones left out).
struct ClaimPlanInput {
  PeerId selfId;
  std::vector<int> claims;  // ours now
  std::vector<SwarmPeer> live;
  std::int64_t nextRound = 0;
  int nExperts = 0;
  int expertsPerPeer = 1;
  int maxExperts = 0;  // memory budget; 0 = none
  // Owners a replica may be shed to: those whose work was merged (unset: every owner). A key whose
  // work never was — a newcomer out of step, a fresh key claiming to make owners shed — is no copy
  // yet: shedding to it left the expert unmerged (tst_swarm_adversary, README run at 43491b5).
  std::function<bool(const PeerId&)> provenOwner = {};
};
std::vector<int> planClaims(const ClaimPlanInput& in);

}  // namespace es::node
