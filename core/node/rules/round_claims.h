// The claims each peer's records stated for each round. A contribution of round R is sized and
// merged with the claims its sender held in R: by the time we fetch it, the sender's record may
// already show round R+1's claims (re-balanced after a join or a leave), and sizing the file by
// those refused an honest peer's contribution and banned it (seen in tst_swarm_churn: "a file of
// 7997020 bytes, expected 15975468"). Pure and bounded: no Qt, no Torch.
#pragma once

#include "core/common/ids.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace es::node {

class RoundClaims {
 public:
  // Rounds kept per peer (older ones are forgotten as newer ones are noted).
  static constexpr int kRoundsKept = 4;

  // `peer`'s record says it is in `round` and trains `claims` (the last word for a round wins).
  void note(const PeerId& peer, std::int64_t round, const std::vector<int>& claims);
  // What `peer` stated for `round`, or nullopt when no record of that round was seen.
  std::optional<std::set<int>> of(const PeerId& peer, std::int64_t round) const;
  // Drops peers that are gone (not in `present`), so the map stays as small as the record book.
  void keepOnly(const std::set<PeerId>& present);
  std::size_t peerCount() const { return byPeer_.size(); }

 private:
  std::map<PeerId, std::map<std::int64_t, std::set<int>>> byPeer_;
};

}  // namespace es::node
