// The weighted-majority vote on a round's merged state (docs/ARCHITECTURE.md, "Agreement"),
// written once: the agreement check (is the state we merged the swarm's?) and closing a round on
// the set the swarm merged it with both ask it. Votes weigh standing (standing.h), never head
// count: fresh keys reporting a state of their own do not outvote the peers we merged with.
// Pure: no Qt, no Torch.
#pragma once

#include "core/node/rules/standing.h"

#include <map>
#include <optional>
#include <set>
#include <string>

namespace es::node {

struct StateBallot {
  std::map<std::string, std::set<PeerId>> reports;  // fingerprint → the peers that merged the round into it
  std::set<PeerId> gathering;                       // peers still gathering the round: they count against every group
  // Peers with a say that merged later rounds but no longer name this one (a record carries its
  // last two): what they merged it into is unknown here, so they count against every group too,
  // and a tie is not decided while there are any (the README run of 4959189: peer-b, judging
  // round 1 after peer-c's record had moved past it, saw only its own state and a stale peer's,
  // took the tie for the stale one and left the majority).
  std::set<PeerId> passed;
};

struct StateGroup {
  std::string fingerprint;
  std::set<PeerId> members;
};

// The heaviest group (ties: the smaller fingerprint) once it holds more than half of the weight
// of every reporter, gatherer and passed peer; when `heaviestIfNoneGathers` and nobody is still
// gathering or passed, the heaviest group wins without a majority (nobody can still change the
// picture). Nothing when no
// one reports, or no group is decided yet.
std::optional<StateGroup> decideMajority(const StateBallot& ballot, const Standing& standing,
                                         bool heaviestIfNoneGathers);

}  // namespace es::node
