#include "core/node/rules/round_claims.h"

namespace es::node {

void RoundClaims::note(const PeerId& peer, std::int64_t round, const std::vector<int>& claims) {
  auto& rounds = byPeer_[peer];
  rounds[round] = std::set<int>(claims.begin(), claims.end());
  while (rounds.size() > std::size_t(kRoundsKept)) rounds.erase(rounds.begin());
}

std::optional<std::set<int>> RoundClaims::of(const PeerId& peer, std::int64_t round) const {
  const auto p = byPeer_.find(peer);
  if (p == byPeer_.end()) return std::nullopt;
  const auto r = p->second.find(round);
  if (r == p->second.end()) return std::nullopt;
  return r->second;
}

void RoundClaims::keepOnly(const std::set<PeerId>& present) {
  for (auto it = byPeer_.begin(); it != byPeer_.end();)
    it = present.count(it->first) ? std::next(it) : byPeer_.erase(it);
}

}  // namespace es::node
