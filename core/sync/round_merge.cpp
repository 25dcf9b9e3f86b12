#include "core/sync/round_merge.h"

#include <algorithm>
#include <stdexcept>

namespace es::sync {
namespace {

// Contributions of this round of this run that name another base were built by a peer that
// merged a different set last round: not its fault (a deadline), so skipped without a verdict
// against it. Anything else wrong with the header is validateRound's to reject.
bool isStale(const ContributionHeader& header, const RoundContext& context) {
  return header.run == context.run && header.round == context.round && header.baseHash != context.baseHash;
}

}  // namespace

Expected<RoundMerge> mergeRound(const NamedTensors& base, const RoundContext& context, std::vector<RoundEntry> entries,
                                const RoundPolicy& policy, std::int64_t mergeStep, const model::ModelConfig& model,
                                const OuterStep& outer) {
  // Sender order, not arrival order: every peer validates and merges the same list the same way.
  std::sort(entries.begin(), entries.end(),
            [](const RoundEntry& a, const RoundEntry& b) { return a.header.sender < b.header.sender; });
  for (std::size_t i = 1; i < entries.size(); ++i)
    if (entries[i].header.sender == entries[i - 1].header.sender)
      return makeError("two contributions of sender \"" + entries[i].header.sender + "\" in one round");
  RoundMerge out;
  std::vector<ContributionHeader> headers;
  std::vector<NamedTensors> deltas;
  std::vector<std::set<int>> claims;
  std::vector<std::size_t> candidates;  // entry index of what reaches validateRound
  for (std::size_t i = 0; i < entries.size(); ++i) {
    auto& v = out.verdicts.emplace_back();
    v.sender = entries[i].header.sender;
    if (isStale(entries[i].header, context)) {
      v.stale = true;
      v.staleBase = entries[i].header.baseHash;
      v.reason = "stale base " + entries[i].header.baseHash;
      continue;
    }
    headers.push_back(entries[i].header);
    deltas.push_back(std::move(entries[i].deltas));
    claims.push_back(entries[i].claims);
    candidates.push_back(i);
  }
  const auto verdicts = validateRound(headers, deltas, base, claims, context, policy.validation);
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    auto& v = out.verdicts[candidates[k]];
    v.accepted = verdicts[k].accepted;
    v.reason = verdicts[k].reason;
    if (!v.accepted) continue;
    for (int e : claims[k]) out.owners[e].insert(v.sender);
    out.accepted.push_back({v.sender, std::move(deltas[k])});
  }
  try {  // es_sync throws only on caller errors (a misshapen delta validateRound let through)
    out.merged = aggregate(base, out.accepted, out.owners, policy.aggregate);
    if (outer) out.merged = outer(base, std::move(out.merged));
    out.alpha = policy.warmup ? warmupAlpha(*policy.warmup, mergeStep) : 0.0;
    if (out.alpha > 0) out.merged = applyMergingWarmup(out.merged, model, out.alpha, policy.warmup->topk);
  } catch (const std::exception& e) {
    return makeError("merging round " + std::to_string(context.round) + ": " + e.what());
  }
  out.fingerprint = stateFingerprint(out.merged);
  return out;
}

}  // namespace es::sync
