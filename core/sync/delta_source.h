// A contribution's decoded deltas, read when the merge needs them (issue 14 item 3).
//
// The merge reads each contribution once per pass, in sender order, and drops it before it reads
// the next, so its peak memory holds one contribution at a time however many peers sent one. The
// client reads from the fetched file (contribution_file.h, contributionDeltas); the simulator and
// tests hold the tensors already (heldDeltas). Every call must give the same tensors: the passes
// validate what they later merge.
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/common/expected.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace es::sync {

using DeltaSource = std::function<Expected<ckpt::NamedTensors>()>;

// Deltas already in memory: each call hands out the same tensors (no copy of their storage).
inline DeltaSource heldDeltas(ckpt::NamedTensors deltas) {
  auto held = std::make_shared<const ckpt::NamedTensors>(std::move(deltas));
  return [held]() -> Expected<ckpt::NamedTensors> { return *held; };
}

struct SenderDeltas {
  std::string sender;  // peer id; unique within a round
  DeltaSource deltas;
  // Its weight in every mean of the merge (work_ledger.h: its merged rounds, capped; 0 for a fresh
  // key, which then counts only where nobody has weight). A small exact integer, ≥ 0: with every
  // weight 1 the sums and divisions are exactly the unweighted ones.
  double weight = 1.0;
  // Factors ≤ 1 its experts' deltas are scaled by in the merge (expert_bound.h); absent: none.
  std::map<int, double> expertScale = {};
};

// One pass: reads every sender's deltas in the given order, one at a time, and hands them to
// `visit(index, deltas)`; they are dropped before the next is read. A source's error ends the pass.
template <typename Visit>
Status forEachSender(const std::vector<SenderDeltas>& senders, Visit&& visit) {
  for (std::size_t i = 0; i < senders.size(); ++i) {
    auto deltas = senders[i].deltas();
    if (!deltas) return makeError("reading the contribution of " + senders[i].sender + ": " + deltas.error());
    visit(i, *deltas);
  }
  return {};
}

}  // namespace es::sync
