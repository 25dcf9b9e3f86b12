// A peer that adopts the swarm's snapshot of round r joins round r+1 while the others are already
// training it. Trained in full, its first round ends late by as much as the others had trained
// before it adopted the snapshot (a whole round when the snapshot came as they finished: in a
// README run of tst_swarm_adversary the newcomer's round-3 contribution came 15 s into a round
// the others closed 8 s in), so a rule that does not wait long for fresh keys cuts it, and it
// never earns standing. Instead it skips the steps the swarm has already trained of round r+1 and
// trains only what is left, so that its contribution comes with theirs (issue 37).
#pragma once

#include <cstdint>
#include <vector>

namespace es::node {

struct FirstRoundPace {
  int syncEvery = 0;                    // steps a round
  std::int64_t tokensPerStep = 0;       // batch_size × seq_len
  double secondsSinceSwarmBegan = 0;    // since the swarm began round r+1, as we heard it
  std::vector<double> tokensPerSecond;  // of the peers that merged the adopted state (their last round)
  double ownSecondsPerStep = 0;         // ours, measured; 0 = unknown (theirs stands in)
  // More than half of those peers already name a contribution to round r+1: they are done
  // training it, whatever the clock says (a record that was here before we started counts as
  // heard at our start, which under-estimates how far they are).
  bool mostHavePublished = false;
};

// The steps of round r+1 to skip: syncEvery minus the steps we can train before the others (at the
// median of their rates) finish theirs — all but one once most have published; always at least
// one step left to train. What the others
// announce can only move this between 0 (today's full round) and syncEvery − 1 (a one-step
// contribution): a liar among them cannot make us skip the round or train past it.
int firstRoundStepsToSkip(const FirstRoundPace& pace);

}  // namespace es::node
