// A reducer's merge of one shard (issue 38 item 3; core/sync/shard_reduce.h): every shard of the
// plan reduced on its own — from the shard's rows of the base and of each sender's deltas — and
// placed back gives the whole merge's aggregate bit for bit: centered clipping per shard with its
// floor, the plain mean, a sparse run's scatter-mean, experts by their owners' mean, the work
// ledger's weights (a fresh key of weight 0 among them) and an expert cut by the expert bound. The proof asks
// for the merged state "bit-identical to today's all-to-all merge of the same inputs".
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/model/tensor_names.h"
#include "core/sync/fetch_size.h"
#include "core/sync/scatter_mean.h"
#include "core/sync/shard_reduce.h"

#include "support/shard_model.h"

#include <torch/torch.h>
#endif

#include <QtTest>

#include <cstring>

using namespace es;
using namespace es::sync;

namespace {

NamedTensors baseOf(const model::ModelConfig& config) {
  torch::manual_seed(21);
  NamedTensors out;
  for (const auto& t : modelTensors(config)) out.emplace_back(t.name, torch::randn(t.shape));
  return out;
}

struct Sender {
  std::string id;
  NamedTensors deltas;
  double weight;
  std::map<int, double> expertScale;
};

// Five senders: shared deltas near one direction ("e" far off in the first shared tensors), each
// owning experts as `owners` says; "f" a fresh key (weight 0); "b"'s expert 1 cut to 0.5.
// `sparse`: each shared delta keeps ~1 in 8 of its elements, different ones per sender (a sparse
// run's top-k falls on different elements: what the scatter-mean is for).
std::vector<Sender> sendersOf(const NamedTensors& base, const Ownership& owners, bool sparse) {
  torch::manual_seed(22);
  std::vector<Sender> out;
  const std::map<std::string, double> weights{{"a", 3}, {"b", 1}, {"c", 2}, {"d", 1}, {"e", 2}, {"f", 0}};
  for (const auto& [id, w] : weights) {
    Sender s{id, {}, w, {}};
    int shared = 0;
    for (const auto& [name, t] : base) {
      const auto expert = model::expertOf(name);
      if (expert && !owners.at(expert->expert).count(id)) continue;
      at::Tensor d = torch::randn(t.sizes()) * 0.01f;
      if (!expert && id == "e" && shared++ < 3) d = d * 50.0f;
      if (!expert && sparse) d = d * (torch::rand(t.sizes()) < 0.125f).to(torch::kFloat);
      s.deltas.emplace_back(name, d);
    }
    if (id == "b") s.expertScale[1] = 0.5;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<SenderDeltas> whole(const std::vector<Sender>& senders) {
  std::vector<SenderDeltas> out;
  for (const auto& s : senders) out.push_back({s.id, heldDeltas(s.deltas), s.weight, s.expertScale});
  return out;
}

std::vector<SenderDeltas> rows(const std::vector<Sender>& senders, const Shard& shard) {
  std::vector<SenderDeltas> out;
  for (const auto& s : senders) out.push_back({s.id, heldDeltas(shardRows(s.deltas, shard)), s.weight, s.expertScale});
  return out;
}

bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  return x.sizes() == y.sizes() && std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

}  // namespace

class ShardReduceTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void everyShardReducedAloneIsTheWholeMerge_data() {
    QTest::addColumn<bool>("clip");
    QTest::addColumn<bool>("scatter");
    QTest::newRow("centered clipping per shard") << true << false;
    QTest::newRow("plain mean") << false << false;
    QTest::newRow("sparse: scatter-mean, centered clipping per shard") << true << true;
  }
  void everyShardReducedAloneIsTheWholeMerge() {
    QFETCH(bool, clip);
    QFETCH(bool, scatter);
    const auto config = test::shardTestModel();
    const NamedTensors base = baseOf(config);
    const Ownership owners{{0, {"a", "f"}}, {1, {"b", "c"}}, {2, {"d"}}, {3, {}}};
    const auto senders = sendersOf(base, owners, scatter);
    std::int64_t shared = 0;
    for (const auto& [name, t] : base)
      if (!model::expertOf(name)) shared += t.numel();
    const std::int64_t shardElements = 3000;  // the embedding and the output cut by rows
    AggregatePolicy policy;
    // τ's floor near the honest spread, so each shard's share of it binds in some shards.
    if (clip) policy = {SharedRule::CenteredClip, 3, 1.0, 2.0, false, shardElements};
    policy.scatterMean = scatter;
    auto wholeSenders = whole(senders);
    if (scatter) QVERIFY(scaleToScatterMean(wholeSenders).ok());  // as mergeRound does, before the aggregate
    const auto all = aggregateStream(base, wholeSenders, owners, policy);
    QVERIFY(all.ok());

    NamedTensors state;
    for (const auto& [name, t] : base) state.emplace_back(name, t.clone());
    const auto shards = planShards(config, shardElements);
    QVERIFY(shards.size() > 8);
    for (const auto& shard : shards) {
      auto merged = reduceShard(shard, shardRows(base, shard), rows(senders, shard), owners, policy, shared);
      QVERIFY2(merged.ok(), merged.ok() ? "" : merged.error().c_str());
      QVERIFY(placeShard(shard, *merged, state).ok());
    }
    for (std::size_t t = 0; t < base.size(); ++t)
      QVERIFY2(sameBits(state[t].second, (*all)[t].second), base[t].first.c_str());
    QVERIFY(!sameBits(state[0].second, base[0].second));  // something moved
  }

  void aShardWithoutAllItsBaseRowsIsRefused() {
    const auto config = test::shardTestModel();
    const NamedTensors base = baseOf(config);
    const auto shards = planShards(config, 3000);
    auto partial = shardRows(base, shards[0]);
    partial.pop_back();
    QVERIFY(!reduceShard(shards[0], partial, {}, {}, {}, 1).ok());
  }
};

QTEST_GUILESS_MAIN(ShardReduceTest)
#include "tst_shard_reduce.moc"
