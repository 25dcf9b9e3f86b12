// Issue 38: one round's inputs for the sharded-round tests (tst_sharded_round,
// tst_sharded_adversaries): a base and momentum, the ledger, the round's policy (centered clipping
// per shard of 3,000 elements, the update ceiling, an outer step, the merging warm-up), and five
// senders' int8 contributions written as shard folders with their signed figures — "c" far off in
// three shared tensors, "d"'s expert cut by the expert bound, "x" past the ceiling (refused; left
// out on request) — with the whole contributions those files decode to, for mergeRound.
// Include it inside the tests' `#ifndef Q_MOC_RUN` (it brings LibTorch).
#pragma once

#include "core/model/tensor_names.h"
#include "core/sync/outer_step.h"
#include "core/sync/round_merge.h"
#include "core/sync/shard_file.h"
#include "core/sync/shard_reduce.h"

#include "support/shard_model.h"

#include <torch/torch.h>

#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace es::test {

using namespace es::sync;

inline constexpr std::int64_t kShardElements = 3000;
inline const std::string kRun(64, 'r');

inline bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  return x.sizes() == y.sizes() && std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

struct Sender {
  std::string id;
  std::set<int> claims;
  std::string folder;  // its shard files
};

// What a sender's files decode to, as whole tensors: the all-to-all side's input.
inline NamedTensors wholeFromFiles(const Sender& s, const ContributionHeader& header, const std::vector<Shard>& shards,
                                   const NamedTensors& base) {
  NamedTensors out;
  for (const auto& [name, t] : base) {
    const auto expert = model::expertOf(name);
    if (!expert || s.claims.count(expert->expert)) out.emplace_back(name, torch::zeros_like(t));
  }
  for (const auto& shard : shards) {
    if (shard.expert >= 0 && !s.claims.count(shard.expert)) continue;
    auto file = loadContributionShard(s.folder + "/" + shardFileName(shard), header, shard);
    if (!file) throw std::runtime_error(file.error());
    NamedTensors rows = piecesAsRows(shard, file->pieces);
    if (!placeShard(shard, rows, out)) throw std::runtime_error("cannot place " + shard.id);
  }
  return out;
}

inline RoundPolicy roundPolicy() {
  RoundPolicy p;
  p.aggregate.shared = SharedRule::CenteredClip;
  p.aggregate.clipShardElements = kShardElements;
  p.validation.ceiling = {0.3, 1.0, 0.0};  // 0.3 a weight; the senders move ~0.01 (c, d up to ~0.2)
  p.outer = {0.8, 0.5, OuterRule::On::Shared};
  p.warmup = WarmupConfig{10, 0.4, 1000, 1};
  return p;
}

struct ShardedRoundInputs {
  model::ModelConfig config = shardTestModel();
  NamedTensors base, momentum;
  RoundContext context;
  std::vector<Shard> shards;
  RoundPolicy policy = roundPolicy();
  WorkLedger ledger = WorkLedger{}.after(3, {"a", "b", "c"}).after(4, {"a", "d"});
  std::vector<Sender> senders;
  std::vector<RoundEntry> entries;  // the all-to-all side's input
};

// Writes the senders' folders under `dir` (round 5); `withRefused`: "x" too.
inline ShardedRoundInputs makeShardedRound(const std::string& dir, bool withRefused) {
  ShardedRoundInputs r;
  torch::manual_seed(38);
  for (const auto& t : modelTensors(r.config)) r.base.emplace_back(t.name, torch::randn(t.shape) * 0.02f);
  r.context = {kRun, 5, stateFingerprint(r.base)};
  r.shards = planShards(r.config, kShardElements);
  r.momentum = zeroMomentum(r.base, r.policy.outer);
  for (auto& [name, m] : r.momentum) m = torch::randn(m.sizes()) * 0.001f;  // rounds of it already
  r.senders = {{"a", {0}, ""}, {"b", {1}, ""}, {"c", {2, 3}, ""}, {"d", {0}, ""}};
  if (withRefused) r.senders.push_back({"x", {1}, ""});
  for (std::size_t k = 0; k < r.senders.size(); ++k) {
    auto& s = r.senders[k];
    s.folder = dir + "/" + s.id;
    auto deltas = senderDeltas(r.config, s.claims, 100 + k);
    if (s.id == "x") deltas[0].second[0][0] = 5.0f;  // past the ceiling: refused
    int shared = 0;
    for (auto& [name, d] : deltas) {
      const auto expert = model::expertOf(name);
      if (s.id == "c" && !expert && shared++ < 3) d = d * 5.0f;  // far off: clipped in those shards
      if (s.id == "d" && expert) d = d * 6.0f;                   // cut by the expert bound
    }
    const ContributionHeader header{kRun, 5, s.id, r.context.baseHash, "int8"};
    if (auto saved = saveContributionShards(s.folder, header, deltas, r.shards); !saved)
      throw std::runtime_error(saved.error());
    r.entries.push_back({header, heldDeltas(wholeFromFiles(s, header, r.shards, r.base)), s.claims});
  }
  return r;
}

}  // namespace es::test
