#include "core/sync/sharded_merge.h"

#include "core/model/tensor_names.h"
#include "core/sync/expert_bound.h"
#include "core/sync/shard_check.h"
#include "core/sync/shard_reduce.h"

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>

namespace es::sync {
namespace {

std::int64_t sharedElementsOf(const NamedTensors& base) {
  std::int64_t shared = 0;
  for (const auto& [name, t] : base)
    if (!model::expertOf(name)) shared += t.numel();
  return shared;
}

std::map<int, double> cutsOf(const ShardedScale& scale, const std::string& sender) {
  std::map<int, double> cuts;
  for (const auto& [key, factor] : scale.expertCuts)
    if (key.first == sender) cuts[key.second] = factor;
  return cuts;
}

const ShardFigure* figureFor(const ShardedSender& sender, const std::string& shard) {
  for (const auto& f : sender.figures)
    if (f.shard == shard) return &f;
  return nullptr;
}

// The shard's rows of one sender, or why it is refused in this shard.
Expected<NamedTensors> checkedRows(const Shard& shard, const ShardedSender& sender, const NamedTensors& base,
                                   const ValidationPolicy& policy, const ShardRowsReader& read, BaseMaxAbs& maxAbs) {
  const ShardFigure* stated = figureFor(sender, shard.id);
  if (!stated) return makeError("no signed figure for shard " + shard.id);
  auto rows = read(sender, shard);
  if (!rows) return rows;
  if (auto reason = checkShardRows(shard, *rows, *stated, base, sender.header.codec, policy, maxAbs); !reason.empty())
    return makeError(reason);
  return rows;
}

// Whether `rows` move any weight of the base further than the run's optimizer moves it in a round
// (the larger of the dense and a sparse run's ceiling): an honest merge cannot, as every mean and
// centered clip of contributions within the ceiling stays within it. Empty: within.
std::string beyondCeiling(const Shard& shard, const NamedTensors& rows, const NamedTensors& base,
                          const ValidationPolicy& policy, BaseMaxAbs& maxAbs) {
  if (!policy.ceiling.known()) return {};
  std::map<std::string, const at::Tensor*> byName;
  for (const auto& [name, t] : base) byName.emplace(name, &t);
  const NamedTensors baseRows = shardRows(base, shard);
  for (std::size_t k = 0; k < rows.size() && k < baseRows.size(); ++k) {
    const auto& [name, row] = rows[k];
    const double most = maxAbs.of(name, *byName.at(name));
    double bound = policy.ceiling.perElement(most);
    if (policy.sparseWaitRounds > 0) bound = std::max(bound, policy.sparseCeiling.perElement(most));
    const double moved = (row - baseRows[k].second).abs().max().item<double>();
    if (!(moved <= bound))
      return "shard " + shard.id + " moves a weight of " + name + " by " + std::to_string(moved) +
             ", past the ceiling " + std::to_string(bound) + ": no honest merge does";
  }
  return {};
}

}  // namespace

ShardedScale shardedScale(const std::vector<ShardedSender>& senders, const std::set<std::string>& out,
                          const WorkLedger& ledger, const ValidationPolicy& policy) {
  std::vector<const ShardedSender*> sorted;
  for (const auto& s : senders)
    if (!out.count(s.header.sender)) sorted.push_back(&s);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->header.sender < b->header.sender; });
  ShardedScale scale;
  std::vector<SenderExperts> experts;
  for (const auto* s : sorted) {
    const std::string& id = s->header.sender;
    if (auto verdict = judgeFigures(s->figures, policy); !verdict.accepted) {
      scale.refused.emplace(id, std::move(verdict));
      continue;
    }
    scale.accepted.push_back(id);
    for (int e : s->claims) scale.owners[e].insert(id);
    std::map<int, double> moves;
    for (const auto& [expert, rms] : expertMovesOfFigures(s->figures))
      if (s->claims.count(expert)) moves[expert] = rms;
    experts.push_back({ledger.weightOf(id), std::move(moves)});
  }
  if (policy.ceiling.known()) {  // as mergeRound: the expert bound is a rule of runs with a ceiling
    const auto scales = expertScales(experts);
    for (std::size_t k = 0; k < scales.size(); ++k)
      for (const auto& [expert, factor] : scales[k]) scale.expertCuts[{scale.accepted[k], expert}] = factor;
  }
  return scale;
}

Expected<MergedShard> reduceRoundShard(const Shard& shard, const NamedTensors& base,
                                       const std::vector<ShardedSender>& senders, const ShardedScale& scale,
                                       const WorkLedger& ledger, const RoundPolicy& policy, const MergedShardKey& key,
                                       const ShardRowsReader& read, BaseMaxAbs& maxAbs) {
  std::map<std::string, const ShardedSender*> byId;
  for (const auto& s : senders) byId.emplace(s.header.sender, &s);
  MergedShard out{key, {}, {}, std::nullopt, {}};
  std::vector<SenderDeltas> rows;  // every accepted sender, as mergeRound's (empty where it carries none)
  for (const auto& id : scale.accepted) {
    const auto it = byId.find(id);
    if (it == byId.end()) return makeError("shard " + shard.id + ": accepted sender " + id + " unknown");
    NamedTensors pieces;
    if (shard.expert < 0 || it->second->claims.count(shard.expert)) {
      auto checked = checkedRows(shard, *it->second, base, policy.validation, read, maxAbs);
      if (!checked) {
        out.refused.insert(id);
        continue;
      }
      pieces = std::move(*checked);
      out.senders.push_back(id);
    }
    rows.push_back({id, heldDeltas(std::move(pieces)), ledger.weightOf(id), cutsOf(scale, id)});
  }
  AggregatePolicy aggregate = policy.aggregate;
  aggregate.clipTauFloor = std::max(aggregate.clipTauFloor, clipTauFloor(base, policy.validation));
  const NamedTensors baseRows = shardRows(base, shard);
  auto merged = reduceShard(shard, baseRows, rows, scale.owners, aggregate, sharedElementsOf(base));
  if (!merged) return makeError("shard " + shard.id + ": " + merged.error());
  if (shard.expert < 0) {
    auto part = shardAgreement(baseRows, *merged, rows);
    if (!part) return makeError("shard " + shard.id + ": " + part.error());
    out.credit = std::move(*part);
  }
  out.rows = std::move(*merged);
  return out;
}

Expected<RoundMerge> applyMergedShards(const NamedTensors& base, const RoundContext& context,
                                       const std::vector<Shard>& plan, const std::vector<MergedShard>& merged,
                                       const ShardedScale& scale, const RoundPolicy& policy, std::int64_t mergeStep,
                                       const model::ModelConfig& model, const NamedTensors& momentum,
                                       const WorkLedger& ledger) {
  const std::string where = "applying round " + std::to_string(context.round) + "'s shards: ";
  if (merged.size() != plan.size()) return makeError(where + "not one merged shard per shard");
  RoundMerge out;
  out.accepted = scale.accepted;
  out.owners = scale.owners;
  out.expertCuts = scale.expertCuts;
  std::vector<ShardAgreement> parts;  // the shared shards' credit, in plan order
  BaseMaxAbs maxAbs;
  try {  // torch throws only on caller errors (rows not of the plan's shapes)
    for (const auto& [name, t] : base) out.merged.emplace_back(name, t.clone());
    for (std::size_t k = 0; k < plan.size(); ++k) {
      const Shard& shard = plan[k];
      const MergedShard& m = merged[k];
      if (m.key.shard != shard.id || !m.refused.empty())
        return makeError(where + "shard " + shard.id + " is not final");
      if (shard.expert < 0) {
        if (!m.credit || m.senders != scale.accepted) return makeError(where + shard.id + " credits other senders");
        parts.push_back(*m.credit);
      }
      if (auto beyond = beyondCeiling(shard, m.rows, base, policy.validation, maxAbs); !beyond.empty())
        return makeError(where + beyond);
      if (auto placed = placeShard(shard, m.rows, out.merged); !placed) return makeError(where + placed.error());
    }
    const auto agreements = combineAgreements(parts, scale.accepted.size());
    for (std::size_t k = 0; k < agreements.size(); ++k) {
      EntryVerdict& v = out.verdicts.emplace_back();
      v.sender = scale.accepted[k];
      v.accepted = true;
      v.agreement = agreements[k].cosine;
      v.credited = agreements[k].credited();
      if (v.credited) out.credited.push_back(v.sender);
    }
    finishRound(base, context, policy, mergeStep, model, momentum, ledger, out);
  } catch (const std::exception& e) {
    return makeError(where + e.what());
  }
  return out;
}

}  // namespace es::sync
