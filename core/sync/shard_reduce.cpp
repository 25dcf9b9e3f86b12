#include "core/sync/shard_reduce.h"

#include "core/sync/scatter_mean.h"

#include <torch/torch.h>

#include <cmath>
#include <map>

namespace es::sync {
namespace {

std::map<std::string, at::Tensor*> byName(NamedTensors& tensors) {
  std::map<std::string, at::Tensor*> out;
  for (auto& [name, t] : tensors) out.emplace(name, &t);
  return out;
}

}  // namespace

NamedTensors shardRows(const NamedTensors& tensors, const Shard& shard) {
  std::map<std::string, const at::Tensor*> index;
  for (const auto& [name, t] : tensors) index.emplace(name, &t);
  NamedTensors out;
  for (const auto& p : shard.pieces) {
    const auto it = index.find(p.tensor);
    if (it == index.end()) continue;
    out.emplace_back(p.tensor, it->second->reshape({-1, p.columns}).narrow(0, p.rowBegin, p.rowEnd - p.rowBegin));
  }
  return out;
}

Expected<NamedTensors> reduceShard(const Shard& shard, const NamedTensors& base,
                                   const std::vector<SenderDeltas>& senders, const Ownership& owners,
                                   AggregatePolicy policy, std::int64_t sharedElements) {
  if (base.size() != shard.pieces.size()) return makeError("shard " + shard.id + ": the base lacks some of its rows");
  // The clip over this shard alone is the whole merge's clip of this shard: one group here, and
  // its floor this shard's share of the round's (robust_aggregate.h).
  if (shard.expert < 0 && policy.clipShardElements > 0 && sharedElements > 0)
    policy.clipTauFloor *= std::sqrt(double(shard.elements()) / double(sharedElements));
  policy.clipShardElements = 0;
  if (!policy.scatterMean) return aggregateStream(base, senders, owners, policy);
  // A sparse run's scatter-mean scales element by element (scatter_mean.h): the shard's rows alone
  // give the whole scaling's rows.
  auto scaled = senders;
  if (auto s = scaleToScatterMean(scaled); !s) return makeError(s.error());
  return aggregateStream(base, scaled, owners, policy);
}

Status placeShard(const Shard& shard, const NamedTensors& merged, NamedTensors& state) {
  auto index = byName(state);
  for (const auto& [name, rows] : merged) {
    const ShardPiece* piece = nullptr;
    for (const auto& p : shard.pieces)
      if (p.tensor == name) piece = &p;
    const auto it = index.find(name);
    if (!piece || it == index.end()) return makeError("shard " + shard.id + ": no place for " + name);
    at::Tensor whole = *it->second;
    if (!whole.is_contiguous()) return makeError("shard " + shard.id + ": " + name + " is not contiguous");
    whole.view({-1, piece->columns}).narrow(0, piece->rowBegin, piece->rowEnd - piece->rowBegin).copy_(rows);
  }
  return {};
}

}  // namespace es::sync
