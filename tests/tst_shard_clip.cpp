// Centered clipping per shard (issue 38: AggregatePolicy::clipShardElements). What a reducer
// holding one shard of every contribution computes alone — centeredClip over that shard's pieces,
// nothing else — is, bit for bit, the slice of the merge every peer computes over whole
// contributions: the property that lets a sharded round merge as an all-to-all one. Also: one
// shard is today's rule exactly; a poisoned tensor is clipped per shard as it was globally; a plan
// that misses or repeats an element is refused.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/model/tensor_names.h"
#include "core/sync/merge.h"
#include "core/sync/robust_aggregate.h"
#include "core/sync/shard_plan.h"

#include <torch/torch.h>
#endif

#include <QtTest>

#include <cmath>
#include <cstring>

using namespace es::sync;

namespace {

// Three shared tensors of uneven sizes (a shard of 40 elements cuts the embedding by rows and
// puts two tensors' pieces in one shard) and an expert, which is never clipped.
NamedTensors base() {
  torch::manual_seed(3);
  return {{"tok_embeddings.weight", torch::randn({12, 10})},
          {"norm.weight", torch::randn({10})},
          {"output.weight", torch::randn({5, 10})},
          {es::model::expertTensorName(0, 0, "w1"), torch::randn({6})}};
}

// Five senders near one direction, "e" 40 × it in the embedding only; weights as a work ledger's.
std::vector<SenderDeltas> senders(const NamedTensors& b) {
  std::vector<SenderDeltas> out;
  torch::manual_seed(8);
  NamedTensors direction;
  for (const auto& [name, t] : b) direction.emplace_back(name, torch::randn(t.sizes()) * 0.01f);
  double weight = 1;
  for (const char* id : {"a", "b", "c", "d", "e"}) {
    NamedTensors d;
    for (const auto& [name, h] : direction) {
      at::Tensor delta = h + torch::randn(h.sizes()) * 0.004f;
      if (std::string(id) == "e" && name == "tok_embeddings.weight") delta = h * 40.0f;
      d.emplace_back(name, delta);
    }
    out.push_back({id, heldDeltas(std::move(d)), weight++});
  }
  return out;
}

std::vector<SharedTensor> sharedOf(const NamedTensors& b) {
  std::vector<SharedTensor> out;
  for (const auto& [name, t] : b)
    if (!es::model::expertOf(name)) out.push_back({name, &t});
  return out;
}

std::vector<es::ckpt::TensorInfo> infosOf(const std::vector<SharedTensor>& shared) {
  std::vector<es::ckpt::TensorInfo> out;
  for (const auto& t : shared) out.push_back({t.name, es::ckpt::DType::F32, t.base->sizes().vec(), 0, 0});
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
  return out;
}

at::Tensor rowsOf(const at::Tensor& t, const ShardPiece& p) {
  return t.reshape({-1, p.columns}).narrow(0, p.rowBegin, p.rowEnd - p.rowBegin);
}

bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  return x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

}  // namespace

class ShardClip : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void aReducerOfOneShardComputesItsSliceBitForBit() {
    const NamedTensors b = base();
    const auto all = senders(b);
    const auto shared = sharedOf(b);
    const double floor = 0.06;  // binds in the later iterations: each shard's floor is its own
    const auto shards = packShards(infosOf(shared), 40);
    QVERIFY(shards.size() >= 4);  // the embedding is cut, a shard holds two tensors' pieces
    auto whole = centeredClip(shared, all, 3, 1.0, floor, shards);
    QVERIFY(whole.ok());
    double total = 0;
    for (const auto& t : shared) total += double(t.base->numel());
    for (const auto& shard : shards) {
      // The reducer's view: each piece a tensor of its own, each sender's deltas cut to them.
      NamedTensors pieces;
      for (const auto& p : shard.pieces) {
        for (const auto& t : shared)
          if (t.name == p.tensor) pieces.emplace_back(p.tensor, rowsOf(*t.base, p));
      }
      std::vector<SenderDeltas> cut;
      for (const auto& s : all) {
        const auto deltas = s.deltas();
        NamedTensors mine;
        for (const auto& p : shard.pieces)
          for (const auto& [name, d] : *deltas)
            if (name == p.tensor) mine.emplace_back(name, rowsOf(d, p).clone());
        cut.push_back({s.sender, heldDeltas(std::move(mine)), s.weight});
      }
      auto alone = centeredClip(sharedOf(pieces), cut, 3, 1.0, floor * std::sqrt(double(shard.elements()) / total));
      QVERIFY(alone.ok());
      for (std::size_t k = 0; k < shard.pieces.size(); ++k) {
        const auto& p = shard.pieces[k];
        std::size_t slot = 0;
        while (shared[slot].name != p.tensor) ++slot;
        QVERIFY2(sameBits(rowsOf((*whole)[slot], p), (*alone)[k]), qPrintable(QString::fromStdString(shard.id)));
      }
    }
  }

  void oneShardIsTheGlobalRuleExactly() {
    const NamedTensors b = base();
    AggregatePolicy global{SharedRule::CenteredClip, 3, 1.0, 0.002};
    AggregatePolicy oneShard = global;
    oneShard.clipShardElements = 1 << 20;
    const auto x = aggregateStream(b, senders(b), {}, global);
    const auto y = aggregateStream(b, senders(b), {}, oneShard);
    QVERIFY(x.ok() && y.ok());
    for (std::size_t t = 0; t < b.size(); ++t) QVERIFY(sameBits((*x)[t].second, (*y)[t].second));
  }

  void thePoisonedShardsAreClippedAsGloballyTheyWere() {
    // "e" moves the embedding 40 × the honest direction: each shard holding embedding rows clips
    // it to its own τ, as the one global distance did (tst_robust_merge holds the global rule's
    // attacks; the simulator measures the rest, docs/PERFORMANCE.md).
    const NamedTensors b = base();
    AggregatePolicy global{SharedRule::CenteredClip, 3, 1.0};
    AggregatePolicy sharded = global;
    sharded.clipShardElements = 40;
    const auto g = aggregateStream(b, senders(b), {}, global);
    const auto s = aggregateStream(b, senders(b), {}, sharded);
    auto honest = senders(b);
    honest.pop_back();
    const auto m = aggregateStream(b, honest, {}, AggregatePolicy{});  // the honest mean
    QVERIFY(g.ok() && s.ok() && m.ok());
    auto move = [&](const NamedTensors& merged, std::size_t t) {
      return (merged[t].second.to(at::kDouble) - b[t].second.to(at::kDouble)).norm().item<double>();
    };
    auto gap = [&](const NamedTensors& merged, std::size_t t) {
      return (merged[t].second.to(at::kDouble) - (*m)[t].second.to(at::kDouble)).norm().item<double>();
    };
    const double honestMove = move(*m, 0);
    QVERIFY2(gap(*s, 0) < 0.5 * honestMove, "the sharded clip let the embedding's poison through");
    QVERIFY2(gap(*g, 0) < 0.5 * honestMove, "the global clip let the embedding's poison through");
    QVERIFY(gap(*s, 0) > 0.0);  // clipped, not dropped: it still moved the centre a little
  }

  void aPlanThatMissesOrRepeatsAnElementIsRefused() {
    const NamedTensors b = base();
    const auto shared = sharedOf(b);
    auto shards = packShards(infosOf(shared), 40);
    auto missing = shards;
    missing.back().pieces.pop_back();
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, (void)centeredClip(shared, senders(b), 1, 1.0, 0.0, missing));
    auto repeated = shards;
    repeated.front().pieces.push_back(shards.back().pieces.back());
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, (void)centeredClip(shared, senders(b), 1, 1.0, 0.0, repeated));
  }
};

QTEST_GUILESS_MAIN(ShardClip)
#include "tst_shard_clip.moc"
