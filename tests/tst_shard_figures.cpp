// A contribution's figures per shard (issue 38; core/sync/shard_figures.h): what the sender
// states from its decoded pieces, a reducer recomputes bit for bit from the shard file it fetched
// (int8 and sparse), whatever order the file's decode gives; a figure off by one ulp or one
// element is refused; and the figures combine into the contribution's norm and RMS — the numbers
// the no-work floor and the norm cap read (validate.h's updateNorm adds them in another order:
// within 1e-12 of it).
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/model/tensor_names.h"
#include "core/sync/contribution_codec.h"
#include "core/sync/expert_bound.h"
#include "core/sync/fetch_size.h"
#include "core/sync/shard_figures.h"
#include "core/sync/shard_file.h"
#include "core/sync/shard_reduce.h"
#include "core/sync/validate.h"

#include "support/shard_model.h"

#include <torch/torch.h>
#endif

#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

using namespace es;
using namespace es::sync;

class ShardFiguresTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void aReducerRecomputesTheSendersFigureExactly_data() {
    QTest::addColumn<QString>("codec");
    for (const char* codec : {"int8", "sparse/16/256"}) QTest::newRow(codec) << QString(codec);
  }
  void aReducerRecomputesTheSendersFigureExactly() {
    QFETCH(QString, codec);
    const auto config = test::shardTestModel();
    const auto shards = planShards(config, 3000);
    const ContributionHeader header{std::string(64, 'r'), 3, "peer-2", "base-1", codec.toStdString()};
    const auto all = test::senderDeltas(config, {2}, 31);
    QTemporaryDir dir;
    QVERIFY(saveContributionShards(dir.path().toStdString(), header, all, shards).ok());
    const auto parsed = *parseContributionCodec(header.codec);
    int checked = 0;
    for (const auto& shard : shards) {
      const auto pieces = cutShard(all, shard);
      if (pieces->empty()) continue;
      // The sender's figure: from what its pieces decode to (what every receiver reads).
      const auto sent = decodeContribution(encodeContribution(*pieces, parsed), parsed);
      const ShardFigure stated = figureOf(shard, piecesAsRows(shard, *sent));
      const auto file = loadContributionShard(dir.path().toStdString() + "/" + shardFileName(shard), header, shard);
      QVERIFY(file.ok());
      const auto rows = piecesAsRows(shard, file->pieces);
      QVERIFY2(figureMatches(stated, shard, rows), shard.id.c_str());
      ShardFigure off = stated;
      off.sumOfSquares = std::nextafter(off.sumOfSquares, 1e300);
      QVERIFY(!figureMatches(off, shard, rows));
      off = stated;
      off.elements += 1;
      QVERIFY(!figureMatches(off, shard, rows));
      ++checked;
    }
    QVERIFY(checked > 4);
  }

  // A sharded round's verdicts (ValidationPolicy::figureShards) read the norm and each expert's
  // RMS from the same figures a reducer recomputes from the files: the same bits both ways.
  void aShardedRoundsVerdictsReadTheFilesFigures() {
    const auto config = test::shardTestModel();
    const auto shards = planShards(config, 3000);
    const ContributionHeader header{std::string(64, 'r'), 3, "peer-2", "base-1", "int8"};
    const auto sent = test::senderDeltas(config, {1, 2}, 32);
    QTemporaryDir dir;
    QVERIFY(saveContributionShards(dir.path().toStdString(), header, sent, shards).ok());
    std::vector<ShardFigure> fromFiles;
    NamedTensors decoded;  // what the files decode to, whole: an all-to-all peer's input
    for (const auto& [name, t] : sent) decoded.emplace_back(name, torch::zeros_like(t));
    for (const auto& shard : shards) {
      if (shard.expert >= 0 && shard.expert != 1 && shard.expert != 2) continue;
      const auto file = loadContributionShard(dir.path().toStdString() + "/" + shardFileName(shard), header, shard);
      QVERIFY(file.ok());
      fromFiles.push_back(figureOf(shard, piecesAsRows(shard, file->pieces)));
      QVERIFY(placeShard(shard, piecesAsRows(shard, file->pieces), decoded).ok());
    }
    NamedTensors base;
    for (const auto& t : modelTensors(config)) base.emplace_back(t.name, torch::zeros(t.shape));
    ValidationPolicy policy;
    policy.figureShards = shards;
    const RoundContext context{header.run, header.round, header.baseHash};
    const auto check = checkContribution(header, decoded, base, {1, 2}, context, policy);
    QVERIFY2(check.reason.empty(), check.reason.c_str());
    QCOMPARE(check.norm, combineFigures(fromFiles).norm);
    QCOMPARE(expertMoves(check), expertMovesOfFigures(fromFiles));
    QCOMPARE(int(expertMoves(check).size()), 2);
    policy.figureShards.clear();  // the per-tensor norms: another order of addition
    QVERIFY(std::abs(checkContribution(header, decoded, base, {1, 2}, context, policy).norm - check.norm) <=
            1e-12 * check.norm);
  }

  void theFiguresCombineIntoTheContributionsNorm() {
    const auto config = test::shardTestModel();
    const auto all = test::senderDeltas(config, {2}, 31);
    const auto figures = contributionFigures(all, planShards(config, 3000));
    const WholeFigure whole = combineFigures(figures);
    std::int64_t elements = 0;
    for (const auto& [name, t] : all) elements += t.numel();
    QCOMPARE(whole.elements, elements);
    const double norm = updateNorm(all);
    QVERIFY2(std::abs(whole.norm - norm) <= 1e-12 * norm, qPrintable(QString::number(whole.norm - norm)));
    // The RMS against LibTorch's own (another order of addition: within 1e-12, not the bits).
    std::vector<at::Tensor> flat;
    for (const auto& [name, t] : all) flat.push_back(t.to(at::kDouble).flatten());
    const double rms = at::cat(flat).square().mean().sqrt().item<double>();
    QVERIFY2(std::abs(whole.rms - rms) <= 1e-12 * rms, qPrintable(QString::number(whole.rms - rms)));
    QCOMPARE(combineFigures({}).rms, 0.0);
  }
};

QTEST_GUILESS_MAIN(ShardFiguresTest)
#include "tst_shard_figures.moc"
