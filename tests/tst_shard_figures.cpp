// A contribution's figures per shard (issue 38; core/sync/shard_figures.h): what the sender
// states from its decoded pieces, a reducer recomputes bit for bit from the shard file it fetched
// (int8 and sparse), whatever order the file's decode gives; a figure off by one ulp or one
// element is refused; and the figures combine into the contribution's norm and RMS — the numbers
// the no-work floor and the norm cap read (validate.h's updateNorm adds them in another order:
// within 1e-12 of it). The figures file (shard_figures_file.h) signs them: one per carried shard,
// read back bit for bit, the folder's files and sizes predicted exactly, and a file that names
// other shards, another order, another spelling or an impossible value is refused.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/model/tensor_names.h"
#include "core/sync/contribution_codec.h"
#include "core/sync/expert_bound.h"
#include "core/sync/fetch_size.h"
#include "core/sync/shard_check.h"
#include "core/sync/shard_figures.h"
#include "core/sync/shard_figures_file.h"
#include "core/sync/shard_file.h"
#include "core/sync/shard_reduce.h"
#include "core/sync/validate.h"

#include "support/shard_model.h"

#include <torch/torch.h>
#endif

#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <filesystem>
#include <limits>

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

  void theFiguresFileHoldsEveryCarriedShardsFigure_data() { aReducerRecomputesTheSendersFigureExactly_data(); }
  void theFiguresFileHoldsEveryCarriedShardsFigure() {
    QFETCH(QString, codec);
    const auto config = test::shardTestModel();
    const auto shards = planShards(config, 3000);
    const ContributionHeader header{std::string(64, 'r'), 3, "peer-2", "base-1", codec.toStdString()};
    const std::set<int> claims{1, 3};
    QTemporaryDir dir;
    const std::string folder = dir.path().toStdString();
    QVERIFY(saveContributionShards(folder, header, test::senderDeltas(config, claims, 33), shards).ok());
    const auto figures = loadShardFigures(folder + "/" + kFiguresFileName, header, shards, claims);
    QVERIFY2(figures.ok(), figures.ok() ? "" : figures.error().c_str());
    std::size_t k = 0;
    for (const auto& shard : shards) {
      if (!carriesShard(shard, claims)) continue;
      QVERIFY(k < figures->size());
      const auto file = loadContributionShard(folder + "/" + shardFileName(shard), header, shard);
      QVERIFY(file.ok());
      QVERIFY2(figureMatches((*figures)[k++], shard, piecesAsRows(shard, file->pieces)), shard.id.c_str());
    }
    QCOMPARE(k, figures->size());
    // The folder, file by file, is what a fetch predicts before its first byte.
    std::vector<std::pair<std::string, std::int64_t>> onDisk;
    for (const auto& entry : std::filesystem::directory_iterator(folder))
      onDisk.emplace_back(entry.path().filename().string(), std::int64_t(entry.file_size()));
    std::sort(onDisk.begin(), onDisk.end());
    QCOMPARE(contributionFolderFiles(shards, claims, header), onDisk);
    // Read as another sender's, or for other claims: refused.
    auto other = header;
    other.sender = "peer-3";
    QVERIFY(!loadShardFigures(folder + "/" + kFiguresFileName, other, shards, claims).ok());
    QVERIFY(!loadShardFigures(folder + "/" + kFiguresFileName, header, shards, {1}).ok());
    QVERIFY(!loadShardFigures(folder + "/" + kFiguresFileName, header, shards, {1, 2, 3}).ok());
  }

  void aFiguresFileOutsideTheRulesIsRefused() {
    const auto config = test::shardTestModel();
    const auto shards = planShards(config, 3000);
    const ContributionHeader header{std::string(64, 'r'), 3, "peer-2", "base-1", "int8"};
    std::vector<ShardFigure> figures;
    for (const auto& shard : shards)
      if (carriesShard(shard, {2})) figures.push_back({shard.id, 0.25 * double(figures.size() + 1), 0, shard.expert});
    QVERIFY(figures.size() > 3);
    QTemporaryDir dir;
    const std::string path = dir.path().toStdString() + "/" + kFiguresFileName;
    const auto good = *figuresMetadata(header, figures);
    const auto refused = [&](ckpt::Metadata meta, const NamedTensors& tensors = {}) {
      if (!ckpt::saveSafetensors(path, tensors, meta)) return false;
      return !loadShardFigures(path, header, shards, {2}).ok();
    };
    QVERIFY(!refused(good));  // the honest file reads
    QCOMPARE(loadShardFigures(path, header, shards, {2})->at(3).sumOfSquares, 1.0);
    auto swapped = figures;
    std::swap(swapped[0], swapped[1]);
    const std::string text = good.at("figures");
    auto with = [&](const std::string& figuresText) {
      auto meta = good;
      meta["figures"] = figuresText;
      return meta;
    };
    QVERIFY(refused(with(figuresText(swapped))));                               // another order
    QVERIFY(refused(with(figuresText({figures.begin() + 1, figures.end()}))));  // one missing
    QVERIFY(refused(with(text + "," + text.substr(0, text.find(',')))));        // one more
    QVERIFY(refused(with(text + ",")));                                         // a trailing comma
    auto upper = text;
    for (auto& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
    QVERIFY(refused(with(upper)));  // another spelling
    for (const double impossible : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
      auto bad = figures;
      bad[2].sumOfSquares = impossible;
      QVERIFY(refused(with(figuresText(bad))));
    }
    auto extraKey = good;
    extraKey["note"] = "x";
    QVERIFY(refused(extraKey));
    QVERIFY(refused(good, {{"x", torch::zeros({1})}}));  // a figures file holds no tensor
  }

  // What reads a whole contribution comes from its figures: the no-work floor and the absolute cap
  // give checkContribution's verdicts; a shard whose bytes do not give its figure, or move a weight
  // past the ceiling, is refused by its reducer.
  void theFiguresVerdictsAreTheWholeChecks() {
    const auto config = test::shardTestModel();
    const auto shards = planShards(config, 3000);
    const ContributionHeader header{std::string(64, 'r'), 3, "peer-2", "base-1", "f32"};
    NamedTensors base;
    for (const auto& t : modelTensors(config)) base.emplace_back(t.name, torch::full(t.shape, 0.5f));
    ValidationPolicy policy;
    policy.ceiling = {0.01, 1.0, 0.0};  // a weight moves at most ~0.0101 a round; no work below RMS 1e-5
    policy.figureShards = shards;
    const RoundContext context{header.run, header.round, header.baseHash};
    for (const float scale : {1.0f, 1e-4f, 4.0f}) {  // honest; no work; past the ceiling (not a figure verdict)
      auto deltas = test::senderDeltas(config, {2}, 34);
      for (auto& [name, d] : deltas) d = (d * 0.2f).clamp(-0.005f, 0.005f) * scale;
      const auto check = checkContribution(header, deltas, base, {2}, context, policy);
      const Verdict fromFigures = judgeFigures(contributionFigures(deltas, shards), policy);
      if (scale > 1.0f) {
        QVERIFY(check.reason.find("moves a weight") != std::string::npos);
        QVERIFY(fromFigures.accepted);  // the ceiling is each shard's reducers' to find:
        BaseMaxAbs maxAbs;
        int refusing = 0;
        for (const auto& shard : shards) {
          const auto rows = shardRows(deltas, shard);
          if (rows.empty()) continue;
          const auto reason = checkShardRows(shard, rows, figureOf(shard, rows), base, "f32", policy, maxAbs);
          refusing += reason.find("moves a weight") != std::string::npos;
        }
        QVERIFY(refusing > 0);
        continue;
      }
      QCOMPARE(fromFigures.accepted, check.reason.empty());
      QCOMPARE(fromFigures.noWork, check.noWork);
      QCOMPARE(fromFigures.reason, check.reason);
    }
    policy.absoluteNormCap = 1e-3;
    const auto honest = test::senderDeltas(config, {2}, 35);
    const Verdict capped = judgeFigures(contributionFigures(honest, shards), policy);
    QVERIFY(!capped.accepted && !capped.noWork);
    QVERIFY(capped.reason.find("absolute cap") != std::string::npos);
    // A figure one ulp off what the shard's bytes give: refused by the shard's reducer.
    const auto rows = shardRows(honest, shards[0]);
    ShardFigure off = figureOf(shards[0], rows);
    BaseMaxAbs maxAbs;
    QVERIFY(checkShardRows(shards[0], rows, off, base, "f32", ValidationPolicy{}, maxAbs).empty());
    off.sumOfSquares = std::nextafter(off.sumOfSquares, 0.0);
    QVERIFY(checkShardRows(shards[0], rows, off, base, "f32", ValidationPolicy{}, maxAbs).find("signed figure") !=
            std::string::npos);
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
