// SpesPeer::remerge: a round merged into another state than the majority's (a deadline closed it
// with another set of contributions) is merged again, from the same base, with the majority's set
// (docs/ARCHITECTURE.md, "Agreement": repair before snapshot). The round's merge is a pure
// function of (base, contributions, policy), so the same set gives the same bytes; the result is
// kept only if its fingerprint is the majority's.
#include "core/spes/spes_peer.h"
#include "core/spes/spes_peer_impl.h"
#include "core/sync/merge.h"

#include <torch/torch.h>

namespace es::node {

using namespace peer_detail;

namespace {

// state + (local − from), tensor by tensor: progress made on `from` carried onto `state`.
NamedTensors carried(const NamedTensors& state, const NamedTensors& local, const NamedTensors& from) {
  NamedTensors out;
  out.reserve(state.size());
  for (std::size_t i = 0; i < state.size(); ++i)
    out.emplace_back(state[i].first, state[i].second + (local[i].second - from[i].second));
  return out;
}

}  // namespace

Expected<Remerged> SpesPeer::remerge(std::int64_t round, const std::vector<IncomingContribution>& contributions,
                                     const std::string& expectedFingerprint, const std::string& rewritePath) {
  auto& d = *impl_;
  if (round != d.baseRound || d.previousBase.empty())
    return makeError("round " + std::to_string(round) + " cannot be merged again here (the state holds round " +
                     std::to_string(d.baseRound) + (d.previousBase.empty() ? ", without the base before it)" : ")"));
  const sync::RoundContext context{d.config.runId, round,
                                   sync::swarmFingerprint(d.previousBase, d.previousMomentum, d.previousLedger)};
  // A file that does not read, or names another sender, is left out as SpesPeer::merge leaves it out.
  std::vector<ContributionVerdict> unread;
  std::map<std::string, std::int64_t> bytesOf;
  auto entries = readEntries(contributions, d.previousBase, unread, bytesOf);
  auto outcome =
      sync::mergeRound(d.previousBase, context, std::move(entries), mergePolicy(d.config, round),
                       round * d.config.syncEvery, d.config.trainer.model, d.previousMomentum, d.previousLedger);
  if (!outcome) return makeError(outcome.error());
  if (outcome->fingerprint != expectedFingerprint)
    return makeError("merging those " + std::to_string(contributions.size()) + " contributions gave state " +
                     outcome->fingerprint + ", not the majority's " + expectedFingerprint);
  // Our progress since the first merge of the round (and since a contribution written after it)
  // was made on the old state; it moves onto the new one as a merge moves it (SpesPeer::merge).
  const auto local = train::trainerWeights(*d.trainer);
  if (auto s = train::setTrainerWeights(*d.trainer, carried(outcome->merged, local, d.base)); !s)
    return makeError(s.error());
  Remerged out;
  out.round = round;
  out.fingerprint = outcome->fingerprint;
  out.sharedFingerprint = sync::stateFingerprint(sharedOnly(outcome->merged));
  out.accepted = static_cast<int>(outcome->accepted.size());
  const bool pending = !d.snapshot.empty();
  if (pending) d.snapshot = carried(outcome->merged, d.snapshot, d.base);
  d.base = std::move(outcome->merged);
  d.momentum = std::move(outcome->momentum);
  d.ledger = std::move(outcome->ledger);
  if (pending) {
    // The same deltas (up to rounding) on the new base: its header names the state we hold now.
    auto written = d.writePending(round + 1, rewritePath, true);
    if (!written)
      return makeError("writing the round " + std::to_string(round + 1) + " contribution again: " + written.error());
    out.rewritten = *written;
  }
  d.persist();
  return out;
}

}  // namespace es::node
