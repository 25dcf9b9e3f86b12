// Issue 38's first proof: a sharded round's merged state is bit-identical to today's all-to-all
// merge (sync::mergeRound) of the same inputs. Five senders cut their int8 contributions into
// shard files and a signed figures file (shard_file.h); one moves a weight past the run's update
// ceiling and is refused, one is far off in three shared tensors (clipped there, τ's floor binding
// elsewhere), one's expert is cut by the expert bound. The all-to-all side merges the
// contributions those files decode to. The sharded side is the production path
// (core/sync/sharded_merge.h) fed by the files alone: the figures give who is out whole and the
// expert bound's cuts, each shard is reduced from its files by reduceRoundShard (checked against
// the signed figure and the ceiling, centered clipping per shard, the ledger's weights, a shared
// shard's credit part), the shards' refusals are gathered into one verdict
// (node/rules/shard_refusals.h: the sender past the ceiling is refused by one shard alone, so a
// second pass runs without it), every output goes through its merged-shard file
// (merged_shard_file.h), and applyMergedShards places them, adds the credit in plan order, takes
// the outer step and the merging warm-up: mergeRound's accepted senders, cuts, credit cosines,
// state, momentum and fingerprint, bit for bit.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/model/tensor_names.h"
#include "core/node/rules/shard_refusals.h"
#include "core/sync/contribution_codec.h"
#include "core/sync/merged_shard_file.h"
#include "core/sync/outer_step.h"
#include "core/sync/round_merge.h"
#include "core/sync/shard_figures_file.h"
#include "core/sync/shard_file.h"
#include "core/sync/shard_reduce.h"
#include "core/sync/sharded_merge.h"

#include "support/sharded_round_inputs.h"

#include <torch/torch.h>
#endif

#include <QTemporaryDir>
#include <QtTest>

#include <cstring>

using namespace es;
using namespace es::sync;
using es::test::kRun;
using es::test::sameBits;
using es::test::Sender;

namespace {

// The sharded round as its peers run it (core/sync/sharded_merge.h): the senders' signed figures
// (loadShardFigures), every shard reduced from its files alone (reduceRoundShard), the shards'
// refusals gathered pass by pass (node/rules/shard_refusals.h), each output written and read back
// as a merged-shard file, and every peer's apply (applyMergedShards). `passes` counts the passes.
Expected<RoundMerge> shardedRound(const std::vector<Sender>& senders, const std::vector<Shard>& shards,
                                  const NamedTensors& base, const RoundContext& context, const RoundPolicy& policy,
                                  const model::ModelConfig& config, const NamedTensors& momentum,
                                  const WorkLedger& ledger, const std::string& outputs, int& passes) {
  std::vector<ShardedSender> known;
  std::map<std::string, ContentId> inputs;  // the round's set, as its digest names it
  for (const auto& s : senders) {
    const ContributionHeader header{kRun, context.round, s.id, context.baseHash, "int8"};
    auto figures = loadShardFigures(s.folder + "/" + kFiguresFileName, header, shards, s.claims);
    if (!figures) return figures.failure();
    known.push_back({header, s.claims, std::move(*figures)});
    inputs.emplace(s.id, ContentId(std::string(63, '0') + std::to_string(inputs.size())));
  }
  const ShardRowsReader read = [&](const ShardedSender& sender, const Shard& shard) -> Expected<NamedTensors> {
    const auto& s =
        *std::find_if(senders.begin(), senders.end(), [&](auto& x) { return x.id == sender.header.sender; });
    auto file = loadContributionShard(s.folder + "/" + shardFileName(shard), sender.header, shard);
    if (!file) return file.failure();
    return piecesAsRows(shard, file->pieces);
  };
  std::vector<std::string> ids;
  for (const auto& shard : shards) ids.push_back(shard.id);
  std::set<std::string> out;  // refused so far
  for (passes = 1; passes <= 3; ++passes) {
    const ShardedScale scale = shardedScale(known, out, ledger, policy.validation);
    for (const auto& [id, verdict] : scale.refused) out.insert(id);  // every peer's, from the figures
    const std::string digest = node::inputDigest(inputs, out);
    std::map<std::string, node::AppliedShard> applied;
    std::vector<MergedShard> merged;
    BaseMaxAbs maxAbs;
    for (const auto& shard : shards) {
      const MergedShardKey key{kRun, context.round, context.baseHash, shard.id, digest};
      auto reduced = reduceRoundShard(shard, base, known, scale, ledger, policy, key, read, maxAbs);
      if (!reduced) return reduced.failure();
      // Through the file every other peer fetches: the input set's senders that carry the shard.
      std::set<std::string> carrying;
      for (const auto& k : known)
        if (std::count(scale.accepted.begin(), scale.accepted.end(), k.header.sender) &&
            (shard.expert < 0 || k.claims.count(shard.expert)))
          carrying.insert(k.header.sender);
      const std::string path = outputs + "/" + mergedShardFileName(context.round, shard.id);
      if (auto saved = saveMergedShard(path, shard, *reduced); !saved) return saved.failure();
      auto back = loadMergedShard(path, key, shard, carrying);
      if (!back) return back.failure();
      applied[shard.id] = {digest, back->refused};
      merged.push_back(std::move(*back));
    }
    const auto verdict = node::gatherRefusals(inputs, out, ids, applied);
    if (verdict.pass == node::RoundPass::Done)
      return applyMergedShards(base, context, shards, merged, scale, policy, 30, config, momentum, ledger);
    out = verdict.refused;
  }
  return makeError("no pass without refusals");
}

}  // namespace

class ShardedRoundTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void theShardedRoundIsTheAllToAllMergeBitForBit() {
    QTemporaryDir dir;
    const auto r = test::makeShardedRound(dir.path().toStdString(), true);
    QVERIFY(r.shards.size() > 8);
    const auto& [config, base, momentum, context, shards, policy, ledger, senders, entries] = r;
    const auto all = mergeRound(base, context, entries, policy, 30, config, momentum, ledger);
    QVERIFY2(all.ok(), all.ok() ? "" : all.error().c_str());
    QCOMPARE(all->accepted, (std::vector<std::string>{"a", "b", "c", "d"}));  // x refused
    QVERIFY(all->alpha > 0);
    QVERIFY(all->expertCuts.count({"d", 0}));
    // The sharded side, from the files alone, as its peers run it: the same round bit for bit.
    int passes = 0;
    const std::string outputs = dir.filePath("outputs").toStdString();
    QVERIFY(QDir().mkpath(QString::fromStdString(outputs)));
    const auto sharded =
        shardedRound(senders, shards, base, context, policy, config, momentum, ledger, outputs, passes);
    QVERIFY2(sharded.ok(), sharded.ok() ? "" : sharded.error().c_str());
    QCOMPARE(passes, 2);  // x refused by one shard's reducers: every shard once more without it
    QCOMPARE(sharded->accepted, all->accepted);
    QCOMPARE(sharded->expertCuts, all->expertCuts);  // from the signed figures: the same bits
    QCOMPARE(sharded->credited, all->credited);
    QVERIFY(!sharded->credited.empty());
    for (const auto& v : all->verdicts) {
      if (!v.accepted) continue;
      const auto it = std::find_if(sharded->verdicts.begin(), sharded->verdicts.end(),
                                   [&](const auto& w) { return w.sender == v.sender; });
      QVERIFY(it != sharded->verdicts.end());
      QVERIFY2(it->agreement == v.agreement, v.sender.c_str());  // the credit's cosine, the same bits
    }
    QCOMPARE(sharded->alpha, all->alpha);
    QCOMPARE(sharded->merged.size(), all->merged.size());
    for (std::size_t t = 0; t < sharded->merged.size(); ++t)
      QVERIFY2(sameBits(sharded->merged[t].second, all->merged[t].second), sharded->merged[t].first.c_str());
    QCOMPARE(sharded->momentum.size(), all->momentum.size());
    for (std::size_t t = 0; t < sharded->momentum.size(); ++t)
      QVERIFY2(sameBits(sharded->momentum[t].second, all->momentum[t].second), sharded->momentum[t].first.c_str());
    QCOMPARE(sharded->fingerprint, all->fingerprint);
    QVERIFY(!sameBits(sharded->merged[0].second, base[0].second));  // something moved
  }
};

QTEST_GUILESS_MAIN(ShardedRoundTest)
#include "tst_sharded_round.moc"
