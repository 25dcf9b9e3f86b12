#include "core/node/rules/standing.h"

#include "core/store/ledger.h"

#include <algorithm>

namespace es::node {

std::int64_t voteWeight(const Standing& standing, const PeerId& peer) {
  const auto it = standing.find(peer);
  return 1 + (it == standing.end() ? 0 : std::clamp<std::int64_t>(it->second, 0, kStandingCap));
}

void anchorStanding(Standing& standing, const std::set<PeerId>& anchors) {
  for (const auto& id : anchors) standing[id] = std::max(standing[id], kStandingCap);
}

std::int64_t totalWeight(const Standing& standing, const std::set<PeerId>& peers) {
  std::int64_t sum = 0;
  for (const auto& peer : peers) sum += voteWeight(standing, peer);
  return sum;
}

namespace {

// The heaviest eligible candidate of one round (ties: the smaller content id, met first).
std::optional<SnapshotChoice> bestOfRound(SnapshotVotes::const_iterator first, SnapshotVotes::const_iterator last,
                                          const Standing& standing, std::size_t neededCount, std::int64_t allWeight,
                                          const std::set<ContentId>* skip) {
  std::optional<SnapshotChoice> best;
  for (auto it = first; it != last; ++it) {
    const auto& [key, announcers] = *it;
    if (skip && skip->count(key.second)) continue;
    const std::int64_t weight = totalWeight(standing, announcers);
    if (announcers.size() < neededCount || 2 * weight < allWeight) continue;
    if (!best || weight > best->weight) best = SnapshotChoice{key.first, key.second, int(announcers.size()), weight};
  }
  return best;
}

}  // namespace

std::optional<SnapshotChoice> chooseSnapshot(const SnapshotBallot& ballot, const Standing& standing) {
  std::set<PeerId> voters;
  for (const auto& [key, announcers] : ballot.votes) voters.insert(announcers.begin(), announcers.end());
  const std::size_t neededCount = voters.size() >= 2 ? 2 : 1;
  const std::int64_t allWeight = totalWeight(standing, voters);
  // Stalled transfers are tried only once nothing else qualifies.
  for (const auto* skip : {&ballot.stalled, static_cast<const std::set<ContentId>*>(nullptr)}) {
    auto roundEnd = ballot.votes.end();
    while (roundEnd != ballot.votes.begin()) {  // newest round first
      const std::int64_t round = std::prev(roundEnd)->first.first;
      const auto roundBegin = ballot.votes.lower_bound({round, ContentId()});
      if (round >= ballot.oldest && round <= ballot.newest)
        if (auto best = bestOfRound(roundBegin, roundEnd, standing, neededCount, allWeight, skip)) return best;
      roundEnd = roundBegin;
    }
  }
  return std::nullopt;
}

Expected<Standing> loadStanding(const std::string& dbPath, const std::string& runId) {
  auto reader = store::LedgerReader::open(dbPath);
  if (!reader) return makeError(reader.error());
  auto rows = (*reader)->acceptedRounds(runId);
  if (!rows) return makeError(rows.error());
  Standing standing;
  for (const auto& [peer, rounds] : *rows) standing.emplace(PeerId(peer), rounds);
  return standing;
}

}  // namespace es::node
