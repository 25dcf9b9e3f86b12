// Issue 38, protocol step 7: which shards a peer audits in a sharded round — it recomputes them
// from their inputs and bans the output's reducers on a mismatch. Drawn from the peer's own
// randomness (the node passes std::random_device's): no seed anyone else holds, so no reducer can
// know whether it is audited, and R colluders that capture a shard are caught by any one of the
// honest peers' draws (docs/ARCHITECTURE.md: escape ≈ e^(−A(1 − c)/5) a round). Uniform over
// the shards the peer does not reduce (its own it computed already).
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

namespace es::node {

// `audits` distinct shard indexes of [0, shards) outside `reduced` (all of those when fewer are
// left), sorted; `entropy` seeds the draw.
std::vector<std::size_t> drawAudits(std::size_t shards, const std::set<std::size_t>& reduced, int audits,
                                    std::uint64_t entropy);

}  // namespace es::node
