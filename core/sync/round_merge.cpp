#include "core/sync/round_merge.h"

#include "core/model/tensor_names.h"
#include "core/sync/expert_bound.h"
#include "core/sync/scatter_mean.h"
#include "core/sync/swarm_state.h"
#include "core/sync/work_credit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace es::sync {
namespace {

// Contributions of this round of this run that name another base were built by a peer that
// merged a different set last round: not its fault (a deadline), so skipped without a verdict
// against it. Anything else wrong with the header is the checks' to reject.
bool isStale(const ContributionHeader& header, const RoundContext& context) {
  return header.run == context.run && header.round == context.round && header.baseHash != context.baseHash;
}

// The validation pass: every entry is read, checked alone (unless stale) and dropped; then the
// round is judged. Fills `out.verdicts` (one per entry, in `entries`' order) and returns the index
// of each accepted entry.
std::vector<std::size_t> validatePass(const NamedTensors& base, const RoundContext& context,
                                      const std::vector<RoundEntry>& entries, const ValidationPolicy& policy,
                                      RoundMerge& out, std::vector<std::map<int, double>>& moves) {
  std::vector<ContributionCheck> checks;
  std::vector<std::size_t> candidates;  // entry index of each check
  BaseMaxAbs maxAbs;                    // the ceiling's per-tensor input, once a round
  for (std::size_t i = 0; i < entries.size(); ++i) {
    auto& v = out.verdicts.emplace_back();
    v.sender = entries[i].header.sender;
    const auto deltas = entries[i].deltas();  // read even when stale: unreadable content is rejected
    if (!deltas && deltas.failure().local) {  // our disk, not the sender (issue 37 item 8)
      v.lost = true;
      v.reason = "lost: " + deltas.error();
      continue;
    }
    if (deltas && isStale(entries[i].header, context)) {
      v.stale = true;
      v.staleBase = entries[i].header.baseHash;
      v.reason = "stale base " + entries[i].header.baseHash;
      continue;
    }
    if (deltas) {
      checks.push_back(
          checkContribution(entries[i].header, *deltas, base, entries[i].claims, context, policy, &maxAbs));
      for (const auto& [expert, rms] : expertMoves(checks.back()))
        if (entries[i].claims.count(expert)) moves[i][expert] = rms;
    } else
      checks.push_back({"unreadable: " + deltas.error(), false, 0.0, {}, {}, {}});
    candidates.push_back(i);
  }
  const auto verdicts = judgeRound(checks, policy);
  std::vector<std::size_t> accepted;
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    auto& v = out.verdicts[candidates[k]];
    v.accepted = verdicts[k].accepted;
    v.reason = verdicts[k].reason;
    v.noWork = verdicts[k].noWork;
    if (v.accepted) accepted.push_back(candidates[k]);
  }
  return accepted;
}

// Which accepted senders earn the round in the work ledger (work_credit.h): those whose shared
// delta agrees with the merged shared update (before any outer step or warm-up: the senders' own
// mean), summed shard by shard in a sharded round. Noted in their verdicts.
Status creditWork(const NamedTensors& base, RoundMerge& out, const std::vector<SenderDeltas>& senders,
                  std::int64_t shardElements) {
  auto agreement = agreementWithMerge(base, out.merged, senders, shardElements);
  if (!agreement) return makeError(agreement.error());
  std::map<std::string, const Agreement*> bySender;
  for (std::size_t k = 0; k < senders.size(); ++k) {
    bySender[senders[k].sender] = &(*agreement)[k];
    if ((*agreement)[k].credited()) out.credited.push_back(senders[k].sender);
  }
  for (auto& v : out.verdicts)
    if (const auto it = bySender.find(v.sender); it != bySender.end()) {
      v.agreement = it->second->cosine;
      v.credited = it->second->credited();
    }
  return {};
}

}  // namespace

double clipTauFloor(const NamedTensors& base, const ValidationPolicy& policy) {
  if (!policy.ceiling.known()) return 0.0;
  std::int64_t shared = 0;
  for (const auto& [name, tensor] : base)
    if (!model::expertOf(name)) shared += tensor.numel();
  return policy.clipFloorFraction * policy.ceiling.lrSum * std::sqrt(double(shared));
}

Expected<RoundMerge> mergeRound(const NamedTensors& base, const RoundContext& context, std::vector<RoundEntry> entries,
                                const RoundPolicy& policy, std::int64_t mergeStep, const model::ModelConfig& model,
                                const NamedTensors& momentum, const WorkLedger& ledger) {
  // Sender order, not arrival order: every peer validates and merges the same list the same way.
  std::sort(entries.begin(), entries.end(),
            [](const RoundEntry& a, const RoundEntry& b) { return a.header.sender < b.header.sender; });
  for (std::size_t i = 1; i < entries.size(); ++i)
    if (entries[i].header.sender == entries[i - 1].header.sender)
      return makeError("two contributions of sender \"" + entries[i].header.sender + "\" in one round");
  RoundMerge out;
  std::vector<SenderDeltas> senders;
  std::vector<std::map<int, double>> moves(entries.size());  // each entry's claimed experts' RMS
  std::vector<SenderExperts> experts;
  ValidationPolicy validation = policy.validation;  // a sharded round's verdicts read shard figures
  if (policy.aggregate.clipShardElements > 0)
    validation.figureShards = planShards(model, policy.aggregate.clipShardElements);
  for (const std::size_t i : validatePass(base, context, entries, validation, out, moves)) {
    for (int e : entries[i].claims) out.owners[e].insert(entries[i].header.sender);
    out.accepted.push_back(entries[i].header.sender);
    const std::string& sender = entries[i].header.sender;
    senders.push_back({sender, std::move(entries[i].deltas), ledger.weightOf(sender)});
    experts.push_back({senders.back().weight, std::move(moves[i])});
  }
  if (policy.validation.ceiling.known()) {  // every run's rules (the median rules' unit tests run without)
    const auto scales = expertScales(experts);
    for (std::size_t k = 0; k < senders.size(); ++k) {
      senders[k].expertScale = scales[k];
      for (const auto& [expert, factor] : scales[k]) out.expertCuts[{senders[k].sender, expert}] = factor;
    }
  }
  const std::string where = "merging round " + std::to_string(context.round) + ": ";
  if (policy.aggregate.scatterMean)
    if (auto s = scaleToScatterMean(senders); !s) return makeError(where + s.error());
  try {  // es_sync throws only on caller errors (a misshapen delta the checks let through)
    auto aggregate = policy.aggregate;
    aggregate.clipTauFloor = std::max(aggregate.clipTauFloor, clipTauFloor(base, policy.validation));
    auto merged = aggregateStream(base, senders, out.owners, aggregate);
    if (!merged) return makeError(where + merged.error());
    out.merged = std::move(*merged);
    if (auto s = creditWork(base, out, senders, aggregate.clipShardElements); !s) return makeError(where + s.error());
    finishRound(base, context, policy, mergeStep, model, momentum, ledger, out);
  } catch (const std::exception& e) {
    return makeError(where + e.what());
  }
  return out;
}

void finishRound(const NamedTensors& base, const RoundContext& context, const RoundPolicy& policy,
                 std::int64_t mergeStep, const model::ModelConfig& model, const NamedTensors& momentum,
                 const WorkLedger& ledger, RoundMerge& out) {
  if (!policy.outer.plain()) {
    auto stepped = applyOuterStep(base, std::move(out.merged), momentum, policy.outer);
    out.merged = std::move(stepped.merged);
    out.momentum = std::move(stepped.momentum);
  }
  out.alpha = policy.warmup ? warmupAlpha(*policy.warmup, mergeStep) : 0.0;
  if (out.alpha > 0) out.merged = applyMergingWarmup(out.merged, model, out.alpha, policy.warmup->topk);
  out.ledger = ledger.after(context.round, out.credited);
  out.fingerprint = swarmFingerprint(out.merged, out.momentum, out.ledger);
}

}  // namespace es::sync
