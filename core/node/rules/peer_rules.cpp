#include "core/node/rules/peer_rules.h"

#include "core/common/lease_terms.h"

#include <algorithm>
#include <cstddef>
#include <set>
#include <tuple>

namespace es::node {

std::uint64_t roundRank(std::int64_t round, const PeerId& peer) {
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a 64 offset basis
  const auto absorb = [&h](std::uint8_t byte) { h = (h ^ byte) * 1099511628211ULL; };
  const auto r = static_cast<std::uint64_t>(round);
  for (int i = 0; i < 8; ++i) absorb(static_cast<std::uint8_t>(r >> (8 * i)));
  for (const char c : peer.str()) absorb(static_cast<std::uint8_t>(c));
  h ^= h >> 33;  // murmur3 fmix64
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

bool ranksBefore(std::int64_t round, const PeerId& a, const PeerId& b) {
  return std::make_pair(roundRank(round, a), a) < std::make_pair(roundRank(round, b), b);
}

bool holdsClaims(const SwarmPeer& peer, std::int64_t round, int leaseRounds) {
  const Announcement& a = peer.announced;
  return !a.claims.empty() && leaseHolds(a.round, a.leaseUntil, round, leaseRounds);
}

bool silentAt(const SwarmPeer& peer, std::int64_t round, std::int64_t claimingSince) {
  if (peer.announced.claims.empty() || round - claimingSince < kSilentRounds || round <= kSilentRounds) return false;
  for (std::int64_t r = round - kSilentRounds; r <= round; ++r)
    if (peer.announced.contrib.count(r)) return false;
  return true;
}

std::vector<SwarmPeer> livePeersOf(const std::vector<SwarmPeer>& peers, std::int64_t round, int leaseRounds,
                                   const Bans& bans, std::int64_t nowMs,
                                   std::map<PeerId, std::int64_t>& claimingSince) {
  std::vector<SwarmPeer> live;
  for (const auto& p : peers) {
    if (p.announced.claims.empty()) continue;
    if (auto ban = bans.find(p.id); ban != bans.end() && banInForce(ban->second, nowMs)) continue;
    const std::int64_t since = claimingSince.emplace(p.id, round).first->second;
    if (holdsClaims(p, round, leaseRounds) && !silentAt(p, round, since)) live.push_back(p);
  }
  return live;
}

std::int64_t swarmRound(const std::vector<SwarmPeer>& peers) {
  std::vector<std::int64_t> rounds;
  for (const auto& p : peers)
    if (p.announced.round > 1 || !p.announced.contrib.empty()) rounds.push_back(p.announced.round);
  if (rounds.empty())
    for (const auto& p : peers) rounds.push_back(p.announced.round);
  if (rounds.empty()) return 0;
  const auto middle = rounds.begin() + static_cast<std::ptrdiff_t>((rounds.size() - 1) / 2);  // lower median
  std::nth_element(rounds.begin(), middle, rounds.end());
  return *middle;
}

// Orphans (no live owner: lease ended, left, banned, silent) are dealt in order to the live peers
// ranked by (claim count, roundRank), so peers with the same view pick disjoint ones. A replica is
// shed by every owner but the first in the round's order, while it holds more than its share;
// never the only copy, and never to an owner whose work was never merged (provenOwner). The
// order changes every round, so no id is always the one that keeps.
std::vector<int> planClaims(const ClaimPlanInput& in) {
  const int e = in.nExperts;
  const std::int64_t round = in.nextRound;
  std::vector<std::vector<PeerId>> owners(static_cast<std::size_t>(std::max(e, 0)));
  for (const auto& p : in.live)
    for (int x : p.announced.claims)
      if (x >= 0 && x < e) owners[static_cast<std::size_t>(x)].push_back(p.id);
  const int n = static_cast<int>(in.live.size());
  const int share = std::max(in.expertsPerPeer, (e + n) / (n + 1));
  std::vector<int> next;
  int kept = static_cast<int>(in.claims.size());
  for (int x : in.claims) {
    const bool outranked =
        x >= 0 && x < e &&
        std::any_of(owners[static_cast<std::size_t>(x)].begin(), owners[static_cast<std::size_t>(x)].end(),
                    [&](const PeerId& o) {
                      return ranksBefore(round, o, in.selfId) && (!in.provenOwner || in.provenOwner(o));
                    });
    if (kept > share && outranked) {
      --kept;
      continue;
    }
    next.push_back(x);
  }
  std::vector<std::tuple<int, std::uint64_t, PeerId>> ranked{
      {static_cast<int>(next.size()), roundRank(round, in.selfId), in.selfId}};
  for (const auto& p : in.live)
    ranked.emplace_back(static_cast<int>(p.announced.claims.size()), roundRank(round, p.id), p.id);
  std::sort(ranked.begin(), ranked.end());
  int j = 0;
  for (int x = 0; x < e; ++x) {
    if (!owners[static_cast<std::size_t>(x)].empty() || std::find(next.begin(), next.end(), x) != next.end()) continue;
    if (in.maxExperts > 0 && static_cast<int>(next.size()) >= in.maxExperts) break;  // memory budget
    if (std::get<2>(ranked[static_cast<std::size_t>(j++ % static_cast<int>(ranked.size()))]) == in.selfId)
      next.push_back(x);
  }
  std::sort(next.begin(), next.end());
  return next;
}

}  // namespace es::node
