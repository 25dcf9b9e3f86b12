// The work ledger: how many rounds each sender's contribution was merged and credited (its shared
// delta agreed with the merge: work_credit.h), as part of the merged state itself (issue 37:
// weight from accepted work that others can check, not head count).
//
// Why in the state and not in each peer's own history: every peer must merge a round into the same
// bits, so whatever weighs a contribution must be the same on every peer. The ledger is a pure
// function of the rounds the swarm agreed on (each merge adds one round to every sender it
// credited), so it is fingerprinted with the weights (a peer that merged another set holds another
// ledger and repairs or resyncs like any other split), persisted with them and carried in
// snapshots, so a newcomer weighs senders as everyone else does.
//
// The weight of a sender in a round's means (shared tensors, centered clipping's τ and centre, an
// expert's owners) is its merged rounds, capped at kWeightCap: a key made a moment ago weighs
// nothing beside senders whose work the swarm merged, however many such keys there are. Where no
// sender that counts has merged work (a run's first round, an expert only newcomers own) every one
// weighs 1 (aggregate.cpp). An honest newcomer's first round thus moves only what nobody else
// owns, and it is merged — which, as it agrees with the merge, earns it weight in the next. Noise
// just over the no-work floor or a reversed update is merged (outweighed) but earns nothing. What
// this cannot see: a key that echoes the swarm's direction is credited; k such keys that stay s
// rounds weigh k·min(s, cap) against the honest peers' H·min(r + s, cap) — they need as many
// credited rounds as the honest peers together (docs/ARCHITECTURE.md, Threat model), and once both
// reach the cap, only more keys than honest peers.

// Bounded: senders not merged for kForgetRounds are dropped, and beyond kMaxEntries the least
// merged (then the longest absent, then by id) go; so fresh keys cannot grow it without bound, and
// they are the first to be forgotten. Pure C++; the tensor form lives in work_ledger_tensor.h.
#pragma once

#include "core/common/expected.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace es::sync {

// The ledger's tensor in a state file: its canonical text as bytes (U8, one dimension). Absent
// while the ledger is empty (swarm_state.h).
inline const char* const kWorkLedgerTensor = "swarm/work_ledger";

class WorkLedger {
 public:
  static constexpr std::int64_t kWeightCap = 64;       // merged rounds past which weight stops growing
  static constexpr std::int64_t kForgetRounds = 1024;  // rounds unmerged before a sender is dropped
  static constexpr std::size_t kMaxEntries = 4096;
  static constexpr std::size_t kMaxSenderChars = 64;  // a peer id is 64 hex digits

  struct Entry {
    std::int64_t merged = 0;     // rounds this sender's contribution was merged
    std::int64_t lastRound = 0;  // the last of them
    bool operator==(const Entry& o) const { return merged == o.merged && lastRound == o.lastRound; }
  };

  bool empty() const { return entries_.empty(); }
  std::size_t size() const { return entries_.size(); }
  const std::map<std::string, Entry>& entries() const { return entries_; }
  std::int64_t mergedRounds(const std::string& sender) const;
  // min(merged rounds, kWeightCap): an exact small integer, so weighted sums stay exact.
  double weightOf(const std::string& sender) const;

  // The ledger after round `round` merged `accepted` (each once): their counts go up, then the
  // bounds above apply.
  WorkLedger after(std::int64_t round, const std::vector<std::string>& accepted) const;

  // Canonical text (one form per ledger, so equal ledgers fingerprint equally) and its strict
  // reader: a header line, then "<sender> <merged> <last round>" lines in ascending sender order.
  // `round`: the state's round; no entry may name a later one. Anything else is an error.
  std::string encode() const;
  static Expected<WorkLedger> decode(const std::string& text, std::int64_t round);
  // The most bytes encode() gives for a state of round `round` (full, the longest ids, every count
  // as long as the round): what a snapshot's size is bounded with before it is fetched.
  static std::int64_t maxEncodedBytes(std::int64_t round);

  bool operator==(const WorkLedger& o) const { return entries_ == o.entries_; }

 private:
  std::map<std::string, Entry> entries_;
};

}  // namespace es::sync
