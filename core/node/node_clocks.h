// The node's clocks, measured as they happen (never a stale value repeated): how long rounds take
// (the adaptive deadline's input), how much of the wall time the trainer spent in steps, and when
// we heard others begin their rounds. Header-only; owned by Node.
#pragma once

#include "core/node/node_config.h"
#include "core/node/node_reports.h"
#include "core/node/node_util.h"
#include "core/node/swarm.h"

#include <QElapsedTimer>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace es::node {

class RoundTimes {
 public:
  // A round closes (by its deadline or not). The first round has no round time before it: its
  // training plus gathering (`firstRoundSeconds`) stands in. Without it the next deadline was 1.5 ×
  // our training time (the minimum, 30 s, on the netlab), and a peer that merged round 1 early
  // closed round 2 alone before the others had even published. Deadline-closed rounds do not
  // feed the deadline (they would only lengthen it); nor do rounds closed without fresh keys
  // (`deadline` true for them too): fresh keys held them, and would lengthen it round by round.
  void close(bool deadline, double firstRoundSeconds) {
    if (sinceClosed_.isValid()) all_.push_back(sinceClosed_.elapsed() / 1000.0);
    if (sinceClosed_.isValid() && !deadline) recent_.push_back(sinceClosed_.elapsed() / 1000.0);
    if (!sinceClosed_.isValid() && !deadline) recent_.push_back(firstRoundSeconds);
    if (recent_.size() > 8) recent_.erase(recent_.begin());
    sinceClosed_.start();
  }
  // Adaptive deadline: a multiple of the recent round time (not of the gather time — peers that
  // train slower than us are not late yet), within the run's bounds. Before any history, our own
  // training time for this round stands in (it reflects the machine's load).
  double deadlineSeconds(const RoundPolicy& policy, double trainedSeconds) const {
    return std::clamp(policy.deadlineFactor * typical(trainedSeconds), policy.deadlineMinSeconds,
                      policy.deadlineMaxSeconds);
  }
  // How long from now (we just trained, and begin to gather) fresh keys (no work of theirs merged)
  // may hold the round: the deadline without its floor (issue 37 item 5), counted from the round's
  // start — the last close, else our training — not from the gather's, so a round they hold
  // lasts factor × the typical round in all (bench/sybil_nodes "stall": from the gather's start it
  // was the training plus that, 2.5 × a quiet round). The floor guards peers whose work we merged
  // against a jittery sub-minimum round; a fresh key's hold is bounded by the straggler margin the
  // run chose (factor − 1 rounds), which a newcomer training its first round, less than that
  // behind, fits in (RoundGather keeps a smaller floor of its own: msUntilFreshDeadline).
  double freshDeadlineSeconds(const RoundPolicy& policy, double trainedSeconds) const {
    return freshHoldSeconds(policy, trainedSeconds) - secondsSinceStart(trainedSeconds);
  }
  // The whole hold, from the round's start: factor × the typical round.
  double freshHoldSeconds(const RoundPolicy& policy, double trainedSeconds) const {
    return std::min(policy.deadlineFactor * typical(trainedSeconds), policy.deadlineMaxSeconds);
  }
  double secondsSinceStart(double trainedSeconds) const {
    return sinceClosed_.isValid() ? sinceClosed_.elapsed() / 1000.0 : trainedSeconds;
  }
  void merged() { ++merged_; }  // a round's merge landed
  std::int64_t mergedCount() const { return merged_; }
  double mean() const {
    if (all_.empty()) return 0;
    double sum = 0;
    for (double v : all_) sum += v;
    return sum / double(all_.size());
  }

 private:
  double typical(double trainedSeconds) const { return std::max(detail::median(recent_), trainedSeconds); }

  QElapsedTimer sinceClosed_;
  std::vector<double> recent_, all_;
  std::int64_t merged_ = 0;
};

// The trainer's steps as they reach the node: the last one, its GPU reading, the busy time.
class TrainerSteps {
 public:
  // `r` reached the node: counted, and given a GPU reading (`readGpu`, may be null) when the last
  // one is at least `gpuEveryMs` old — a step without a fresh reading carries none.
  void stepped(StepReport& r, const std::function<std::optional<GpuReading>()>& readGpu, int gpuEveryMs) {
    if (!sinceFirstStep_.isValid()) {
      sinceFirstStep_.start();
      firstStepSeconds_ = r.seconds;
    }
    stepSeconds_ += r.seconds;
    if (readGpu && (!sinceGpuReading_.isValid() || sinceGpuReading_.elapsed() >= gpuEveryMs)) {
      r.gpu = readGpu();
      sinceGpuReading_.start();
    }
    last_ = r;
  }
  const StepReport& last() const { return last_; }
  // Fraction of the wall time since the first step that the trainer spent inside steps.
  double busyFraction() const {
    if (!sinceFirstStep_.isValid()) return 0;
    const double wall = sinceFirstStep_.elapsed() / 1000.0 + firstStepSeconds_;
    return wall > 0 ? std::min(1.0, stepSeconds_ / wall) : 0;
  }

 private:
  StepReport last_;
  QElapsedTimer sinceFirstStep_, sinceGpuReading_;
  double firstStepSeconds_ = 0, stepSeconds_ = 0;
};

// When we first heard each peer announce a merged state of a round — it then began training the
// next: how far the swarm is into its round when we take a snapshot (rules/first_round.h). At
// most kKept entries, the oldest heard out first (a flood of made-up rounds evicts only by
// arriving, and the record book bounds that); a record already here when we started counts as
// heard then, so a late joiner under-estimates the swarm's lead (and trains more, as before).
class SwarmPace {
 public:
  void heard(const std::vector<SwarmPeer>& peers) {
    if (!clock_.isValid()) clock_.start();
    for (const auto& p : peers)
      for (const auto& merged : p.announced.merged) {
        const auto key = std::make_pair(merged.first, p.id);
        if (!firstHeardMs_.try_emplace(key, clock_.elapsed()).second) continue;
        order_.push_back(key);
        if (order_.size() > kKept) {
          firstHeardMs_.erase(order_.front());
          order_.pop_front();
        }
      }
  }
  std::optional<double> secondsSinceMerged(const PeerId& peer, std::int64_t round) const {
    const auto it = firstHeardMs_.find({round, peer});
    if (it == firstHeardMs_.end()) return std::nullopt;
    return double(clock_.elapsed() - it->second) / 1000.0;
  }

 private:
  static constexpr std::size_t kKept = 8192;
  QElapsedTimer clock_;
  std::map<std::pair<std::int64_t, PeerId>, std::int64_t> firstHeardMs_;
  std::deque<std::pair<std::int64_t, PeerId>> order_;
};

}  // namespace es::node
