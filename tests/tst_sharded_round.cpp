// Issue 38's first proof, as far as it is built: a sharded round's merged state is bit-identical to
// today's all-to-all merge (sync::mergeRound) of the same inputs. Five senders cut their int8
// contributions into shard files (shard_file.h); one moves a weight past the run's update ceiling
// and is refused, one is far off in three shared tensors (clipped there, τ's floor binding
// elsewhere), one's expert is cut by the expert bound. The all-to-all side merges the
// contributions those files decode to; the sharded side reduces every shard from the files alone
// (each sender's file of that shard, read strictly), with centered clipping per shard, the work
// ledger's weights and the expert bound's cuts, places the merged shards back, then takes the
// outer step and the merging warm-up — and lands on mergeRound's bits, momentum included. The
// work credit, from each shared shard's part of every sender's agreement (work_credit.h's
// shardAgreement), credits the same senders with the same cosines, so the ledger and the
// fingerprint agree too.
// The expert bound's cuts come from the senders' signed shard figures (shard_figures_file.h), as
// mergeRound's own do in a sharded round, and so do the refusals: the whole-contribution verdicts
// from the figures (shard_check.h's judgeFigures), each shard's from its reducers' checks of the
// files (checkShardRows), gathered into one verdict (node/rules/shard_refusals.h) — the senders
// mergeRound accepts, in two passes (the one past the ceiling is refused by one shard alone). The
// reducers' outputs reach the other peers as merged-shard files (merged_shard_file.h), read strictly
// against the round's set: the rows placed and the credit parts added come from those files.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/model/tensor_names.h"
#include "core/node/rules/shard_refusals.h"
#include "core/sync/contribution_codec.h"
#include "core/sync/expert_bound.h"
#include "core/sync/merged_shard_file.h"
#include "core/sync/outer_step.h"
#include "core/sync/round_merge.h"
#include "core/sync/shard_check.h"
#include "core/sync/shard_figures_file.h"
#include "core/sync/shard_file.h"
#include "core/sync/shard_reduce.h"
#include "core/sync/swarm_state.h"
#include "core/sync/work_credit.h"

#include "support/shard_model.h"

#include <torch/torch.h>
#endif

#include <QTemporaryDir>
#include <QtTest>

#include <cstring>

using namespace es;
using namespace es::sync;

namespace {

constexpr std::int64_t kShardElements = 3000;
const std::string kRun(64, 'r');

bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  return x.sizes() == y.sizes() && std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

struct Sender {
  std::string id;
  std::set<int> claims;
  std::string folder;  // its shard files
};

// What a sender's files decode to, as whole tensors: the all-to-all side's input.
NamedTensors wholeFromFiles(const Sender& s, const ContributionHeader& header, const std::vector<Shard>& shards,
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

// Which senders a sharded round accepts: those the signed figures do not refuse whole
// (judgeFigures) and no shard's reducers refuse (checkShardRows over each sender's file of the
// shard), gathered pass by pass (gatherRefusals) as the node will; `passes` counts the passes.
std::vector<std::string> shardedAccepted(const std::vector<Sender>& senders, const std::vector<Shard>& shards,
                                         const NamedTensors& base, const RoundContext& context,
                                         const ValidationPolicy& validation, int& passes) {
  std::map<std::string, ContentId> inputs;
  std::map<std::string, std::vector<ShardFigure>> figures;
  std::set<std::string> refused;
  for (const auto& s : senders) {
    const ContributionHeader header{kRun, context.round, s.id, context.baseHash, "int8"};
    inputs.emplace(s.id, ContentId(std::string(63, '0') + std::to_string(inputs.size())));
    auto stated = loadShardFigures(s.folder + "/" + kFiguresFileName, header, shards, s.claims);
    if (!stated) throw std::runtime_error(stated.error());
    if (!judgeFigures(*stated, validation).accepted) refused.insert(s.id);
    figures[s.id] = std::move(*stated);
  }
  std::vector<std::string> ids;
  for (const auto& shard : shards) ids.push_back(shard.id);
  BaseMaxAbs maxAbs;
  for (passes = 1; passes <= 3; ++passes) {
    std::map<std::string, node::AppliedShard> applied;
    for (const auto& shard : shards) {
      node::AppliedShard& out = applied[shard.id];
      out.inputDigest = node::inputDigest(inputs, refused);
      for (const auto& s : senders) {
        if (refused.count(s.id) || (shard.expert >= 0 && !s.claims.count(shard.expert))) continue;
        const ContributionHeader header{kRun, context.round, s.id, context.baseHash, "int8"};
        auto file = loadContributionShard(s.folder + "/" + shardFileName(shard), header, shard);
        if (!file) throw std::runtime_error(file.error());
        const auto& mine = figures.at(s.id);
        const auto stated = std::find_if(mine.begin(), mine.end(), [&](const auto& f) { return f.shard == shard.id; });
        if (!checkShardRows(shard, piecesAsRows(shard, file->pieces), *stated, base, header.codec, validation, maxAbs)
                 .empty())
          out.refused.insert(s.id);
      }
    }
    const auto verdict = node::gatherRefusals(inputs, refused, ids, applied);
    if (verdict.pass == node::RoundPass::Done) break;
    refused = verdict.refused;
  }
  std::vector<std::string> accepted;
  for (const auto& s : senders)
    if (!refused.count(s.id)) accepted.push_back(s.id);
  return accepted;
}

RoundPolicy roundPolicy() {
  RoundPolicy p;
  p.aggregate.shared = SharedRule::CenteredClip;
  p.aggregate.clipShardElements = kShardElements;
  p.validation.ceiling = {0.3, 1.0, 0.0};  // 0.3 a weight; the senders move ~0.01 (c, d up to ~0.2)
  p.outer = {0.8, 0.5, OuterRule::On::Shared};
  p.warmup = WarmupConfig{10, 0.4, 1000, 1};
  return p;
}

}  // namespace

class ShardedRoundTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void theShardedRoundIsTheAllToAllMergeBitForBit() {
    const auto config = test::shardTestModel();
    torch::manual_seed(38);
    NamedTensors base, momentum;
    for (const auto& t : modelTensors(config)) base.emplace_back(t.name, torch::randn(t.shape) * 0.02f);
    const RoundContext context{kRun, 5, stateFingerprint(base)};
    const auto shards = planShards(config, kShardElements);
    QVERIFY(shards.size() > 8);
    const RoundPolicy policy = roundPolicy();
    momentum = zeroMomentum(base, policy.outer);
    for (auto& [name, m] : momentum) m = torch::randn(m.sizes()) * 0.001f;  // rounds of it already
    const WorkLedger ledger = WorkLedger{}.after(3, {"a", "b", "c"}).after(4, {"a", "d"});

    QTemporaryDir dir;
    std::vector<Sender> senders{{"a", {0}, ""}, {"b", {1}, ""}, {"c", {2, 3}, ""}, {"d", {0}, ""}, {"x", {1}, ""}};
    std::vector<RoundEntry> entries;
    for (std::size_t k = 0; k < senders.size(); ++k) {
      auto& s = senders[k];
      s.folder = dir.filePath(QString::fromStdString(s.id)).toStdString();
      auto deltas = test::senderDeltas(config, s.claims, 100 + k);
      if (s.id == "x") deltas[0].second[0][0] = 5.0f;  // past the ceiling: refused
      int shared = 0;
      for (auto& [name, d] : deltas) {
        const auto expert = model::expertOf(name);
        if (s.id == "c" && !expert && shared++ < 3) d = d * 5.0f;  // far off: clipped in those shards
        if (s.id == "d" && expert) d = d * 6.0f;                   // cut by the expert bound
      }
      const ContributionHeader header{kRun, 5, s.id, context.baseHash, "int8"};
      QVERIFY(saveContributionShards(s.folder, header, deltas, shards).ok());
      entries.push_back({header, heldDeltas(wholeFromFiles(s, header, shards, base)), s.claims});
    }
    const auto all = mergeRound(base, context, entries, policy, 30, config, momentum, ledger);
    QVERIFY2(all.ok(), all.ok() ? "" : all.error().c_str());
    QCOMPARE(all->accepted, (std::vector<std::string>{"a", "b", "c", "d"}));  // x refused
    QVERIFY(all->alpha > 0);
    QVERIFY(all->expertCuts.count({"d", 0}));
    int passes = 0;
    ValidationPolicy validation = policy.validation;
    validation.figureShards = shards;
    const auto accepted = shardedAccepted(senders, shards, base, context, validation, passes);
    QCOMPARE(accepted, all->accepted);
    QCOMPARE(passes, 2);  // x refused by one shard's reducers: every shard once more without it

    // The expert bound from the senders' shard figures (what each states and its reducers
    // recompute from the files), as a sharded round's peers compute it: the same cuts.
    std::vector<SenderExperts> experts;
    std::vector<std::string> acceptedIds;
    for (const auto& s : senders) {
      if (std::find(accepted.begin(), accepted.end(), s.id) == accepted.end()) continue;
      const ContributionHeader header{kRun, 5, s.id, context.baseHash, "int8"};
      std::vector<ShardFigure> figures;
      for (const auto& shard : shards) {
        if (shard.expert >= 0 && !s.claims.count(shard.expert)) continue;
        auto file = loadContributionShard(s.folder + "/" + shardFileName(shard), header, shard);
        QVERIFY(file.ok());
        figures.push_back(figureOf(shard, piecesAsRows(shard, file->pieces)));
      }
      std::map<int, double> moves;
      for (const auto& [expert, rms] : expertMovesOfFigures(figures))
        if (s.claims.count(expert)) moves[expert] = rms;
      experts.push_back({ledger.weightOf(s.id), moves});
      acceptedIds.push_back(s.id);
    }
    const auto scales = expertScales(experts);
    std::map<std::pair<std::string, int>, double> cutsFromFigures;
    for (std::size_t k = 0; k < scales.size(); ++k)
      for (const auto& [expert, factor] : scales[k]) cutsFromFigures[{acceptedIds[k], expert}] = factor;
    QCOMPARE(cutsFromFigures, all->expertCuts);  // bit for bit: both add the same figures

    // The sharded side: every shard from its files, as its reducers would.
    AggregatePolicy aggregate = policy.aggregate;
    aggregate.clipTauFloor = clipTauFloor(base, policy.validation);
    std::int64_t sharedElements = 0;
    for (const auto& [name, t] : base)
      if (!model::expertOf(name)) sharedElements += t.numel();
    NamedTensors state;
    for (const auto& [name, t] : base) state.emplace_back(name, t.clone());
    std::vector<ShardAgreement> credit;  // each shared shard's part of the work credit
    const std::string outputs = dir.filePath("outputs").toStdString();
    QVERIFY(QDir().mkpath(QString::fromStdString(outputs)));
    std::map<std::string, ContentId> inputs;  // the round's set, as its digest names it
    for (std::size_t k = 0; k < senders.size(); ++k)
      inputs.emplace(senders[k].id, ContentId(std::string(63, '0') + std::to_string(k)));
    const std::string digest = node::inputDigest(inputs, {"x"});
    const auto carriers = [&](const Shard& shard) {  // the accepted senders that carry the shard
      std::set<std::string> ids;
      for (const auto& s : senders)
        if (std::count(accepted.begin(), accepted.end(), s.id) && (shard.expert < 0 || s.claims.count(shard.expert)))
          ids.insert(s.id);
      return ids;
    };
    for (const auto& shard : shards) {
      std::vector<SenderDeltas> rows;
      for (const auto& s : senders) {
        if (std::find(accepted.begin(), accepted.end(), s.id) == accepted.end()) continue;
        std::map<int, double> cuts;
        for (const auto& [key, factor] : cutsFromFigures)
          if (key.first == s.id) cuts[key.second] = factor;
        NamedTensors pieces;
        if (shard.expert < 0 || s.claims.count(shard.expert)) {
          const ContributionHeader header{kRun, 5, s.id, context.baseHash, "int8"};
          auto file = loadContributionShard(s.folder + "/" + shardFileName(shard), header, shard);
          QVERIFY2(file.ok(), file.ok() ? "" : file.error().c_str());
          pieces = piecesAsRows(shard, file->pieces);
        }
        rows.push_back({s.id, heldDeltas(pieces), ledger.weightOf(s.id), cuts});
      }
      auto merged = reduceShard(shard, shardRows(base, shard), rows, all->owners, aggregate, sharedElements);
      QVERIFY2(merged.ok(), merged.ok() ? "" : merged.error().c_str());
      // The reducer's output file (merged_shard_file.h): rows, the set, and a shared shard's credit part.
      MergedShard out{{kRun, 5, context.baseHash, shard.id, digest}, {}, {}, std::nullopt, *merged};
      const auto carrying = carriers(shard);
      out.senders.assign(carrying.begin(), carrying.end());
      if (shard.expert < 0) {
        auto part = shardAgreement(shardRows(base, shard), *merged, rows);
        QVERIFY(part.ok());
        out.credit = std::move(*part);
      }
      QVERIFY(saveMergedShard(outputs + "/" + mergedShardFileName(5, shard.id), shard, out).ok());
    }
    // Every peer: the merged shards from the reducers' files alone, placed, the credit parts added.
    for (const auto& shard : shards) {
      auto merged = loadMergedShard(outputs + "/" + mergedShardFileName(5, shard.id),
                                    {kRun, 5, context.baseHash, shard.id, digest}, shard, carriers(shard));
      QVERIFY2(merged.ok(), merged.ok() ? "" : merged.error().c_str());
      QVERIFY(placeShard(shard, merged->rows, state).ok());
      if (merged->credit) credit.push_back(std::move(*merged->credit));
    }
    const auto agreements = combineAgreements(credit, accepted.size());
    std::vector<std::string> credited;
    for (std::size_t k = 0; k < agreements.size(); ++k)
      if (agreements[k].credited()) credited.push_back(accepted[k]);
    QCOMPARE(credited, all->credited);
    QVERIFY(!credited.empty());
    for (const auto& v : all->verdicts)
      if (v.accepted) {
        const auto k = std::find(accepted.begin(), accepted.end(), v.sender) - accepted.begin();
        QVERIFY2(agreements[k].cosine == v.agreement, v.sender.c_str());  // the same bits
      }
    const WorkLedger after = ledger.after(5, credited);
    auto stepped = applyOuterStep(base, std::move(state), momentum, policy.outer);
    const NamedTensors final = applyMergingWarmup(stepped.merged, config, all->alpha, policy.warmup->topk);

    QCOMPARE(final.size(), all->merged.size());
    for (std::size_t t = 0; t < final.size(); ++t)
      QVERIFY2(sameBits(final[t].second, all->merged[t].second), final[t].first.c_str());
    QCOMPARE(stepped.momentum.size(), all->momentum.size());
    for (std::size_t t = 0; t < stepped.momentum.size(); ++t)
      QVERIFY2(sameBits(stepped.momentum[t].second, all->momentum[t].second), stepped.momentum[t].first.c_str());
    QCOMPARE(swarmFingerprint(final, stepped.momentum, after), all->fingerprint);
    QVERIFY(!sameBits(final[0].second, base[0].second));  // something moved
  }
};

QTEST_GUILESS_MAIN(ShardedRoundTest)
#include "tst_sharded_round.moc"
