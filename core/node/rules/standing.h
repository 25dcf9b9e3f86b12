// Standing (issue 15, item 1: Sybil majorities). Keys are free, so a vote about the swarm's
// state — whose merged fingerprint is the swarm's, which snapshot to adopt, who is out of step —
// must not count identities. Each voter weighs what it has done for us: 1 + the rounds in which
// we merged (accepted) a contribution of theirs, capped. A fresh key weighs 1; a peer that has
// contributed to 20 of our rounds weighs 21, so Sybils outvote the honest peers only after doing
// as much accepted work as they did. The node counts accepted rounds as it merges and reloads them
// from the ledger's verdicts at start (a restart does not reset who has done the work).
//
// What it cannot do: a newcomer has merged nothing yet, so to it every key weighs 1 — its first
// snapshot is still chosen by counting announcers (docs/ARCHITECTURE.md, Threat model) — unless
// the run names anchors (swarm.anchors: peers its author vouches for, e.g. the author's own
// always-on peers): they weigh the cap from the start, for everyone, so a newcomer follows them
// over fresh keys.
// Pure functions over peer ids: no Qt, no Torch.
#pragma once

#include "core/common/expected.h"
#include "core/common/ids.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace es::node {

using Standing = std::map<PeerId, std::int64_t>;  // peer → rounds we accepted its contribution
constexpr std::int64_t kStandingCap = 64;         // a long-standing peer is not a dictator

std::int64_t voteWeight(const Standing& standing, const PeerId& peer);
std::int64_t totalWeight(const Standing& standing, const std::set<PeerId>& peers);

// The snapshots announced to us: (round, content id) → the peers that announce it.
using SnapshotVotes = std::map<std::pair<std::int64_t, ContentId>, std::set<PeerId>>;

struct SnapshotBallot {
  SnapshotVotes votes;
  std::int64_t oldest = 0, newest = 0;  // adoptable rounds (the caller bounds them by the swarm's round)
  std::set<ContentId> stalled;          // contents whose transfer stalled: tried after all others
};

struct SnapshotChoice {
  std::int64_t round = 0;
  ContentId contentId;
  int announcers = 0;
  std::int64_t weight = 0;
};

// The newest adoptable snapshot that (a) at least two peers announce (one, if only one peer
// announces snapshots at all: a single peer cannot feed us a state of its own making) and (b)
// carries at least half the weight of all the peers that announce snapshots; within a round the
// heaviest, ties to the smaller content id.
std::optional<SnapshotChoice> chooseSnapshot(const SnapshotBallot& ballot, const Standing& standing);

// The run's anchors at the cap (their earned standing only grows to it anyway).
void anchorStanding(Standing& standing, const std::set<PeerId>& anchors);

// The run's accepted rounds per peer, read from the ledger file at dbPath.
Expected<Standing> loadStanding(const std::string& dbPath, const std::string& runId);

}  // namespace es::node
