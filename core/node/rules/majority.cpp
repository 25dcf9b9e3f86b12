#include "core/node/rules/majority.h"

namespace es::node {

std::optional<StateGroup> decideMajority(const StateBallot& ballot, const Standing& standing,
                                         bool heaviestIfNoneGathers) {
  if (ballot.reports.empty()) return std::nullopt;
  std::set<PeerId> voters = ballot.gathering;
  voters.insert(ballot.passed.begin(), ballot.passed.end());
  auto heaviest = ballot.reports.begin();
  for (auto it = ballot.reports.begin(); it != ballot.reports.end(); ++it) {
    voters.insert(it->second.begin(), it->second.end());
    if (totalWeight(standing, it->second) > totalWeight(standing, heaviest->second)) heaviest = it;
  }
  const bool majority = 2 * totalWeight(standing, heaviest->second) > totalWeight(standing, voters);
  const bool settled = ballot.gathering.empty() && ballot.passed.empty();
  if (!majority && !(heaviestIfNoneGathers && settled)) return std::nullopt;
  return StateGroup{heaviest->first, heaviest->second};
}

}  // namespace es::node
