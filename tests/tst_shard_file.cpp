// A contribution cut into shard files (issue 38; core/sync/shard_file.h): each shard the
// contribution carries is one file whose pieces decode to exactly what the codec makes of that
// piece, whose size is the byte model's (fetch_size.h, bench/reduction_scale) to the byte, and
// that is read strictly — another shard's file, another contribution's, or a file missing a piece
// is refused. Shards of experts the sender does not own leave no file. A reducer's merged shard
// (merged_shard_file.h) reads back bit for bit, two reducers' files of one output are the same
// bytes (one info-hash, one swarm), and a file naming another set, senders that are not the set's,
// or credit that does not fit is refused.
#ifndef Q_MOC_RUN  // moc need not parse LibTorch
#include "core/model/tensor_names.h"
#include "core/sync/contribution_codec.h"
#include "core/sync/fetch_size.h"
#include "core/sync/merged_shard_file.h"
#include "core/sync/shard_figures_file.h"
#include "core/sync/shard_file.h"
#include "core/sync/shard_reduce.h"

#include "support/shard_model.h"

#include <torch/torch.h>
#endif

#include <QTemporaryDir>
#include <QtTest>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

using namespace es;
using namespace es::sync;

namespace {

ContributionHeader header(const std::string& codec) { return {std::string(64, 'a'), 7, "peer-1", "base-9", codec}; }

bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  return x.sizes() == y.sizes() && std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

ckpt::Metadata metadataOf(const ContributionHeader& h, const Shard& shard) {
  return {{"format", kShardFormat}, {"version", "1"},          {"run", h.run},     {"round", std::to_string(h.round)},
          {"sender", h.sender},     {"base_hash", h.baseHash}, {"codec", h.codec}, {"shard", shard.id}};
}

}  // namespace

class ShardFileTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void eachShardRoundTripsAtTheModelsSize_data() {
    QTest::addColumn<QString>("codec");
    for (const char* codec : {"f32", "int8", "sparse/16/256"}) QTest::newRow(codec) << QString(codec);
  }
  void eachShardRoundTripsAtTheModelsSize() {
    QFETCH(QString, codec);
    const auto config = test::shardTestModel();
    const auto shards = planShards(config, 3000);  // cuts the embedding and the output by rows
    QTemporaryDir dir;
    const auto h = header(codec.toStdString());
    const auto all = test::senderDeltas(config, {0, 1}, 4);
    auto written = saveContributionShards(dir.filePath("c").toStdString(), h, all, shards);
    QVERIFY2(written.ok(), written.ok() ? "" : written.error().c_str());
    int expected = 0;
    for (const auto& shard : shards) {
      const std::string path = dir.filePath("c").toStdString() + "/" + shardFileName(shard);
      if (shard.expert > 1) {  // another owner's: no file
        QVERIFY(!std::filesystem::exists(path));
        continue;
      }
      ++expected;
      QCOMPARE(std::int64_t(std::filesystem::file_size(path)), shardFileBytes(shard, h.codec, metadataOf(h, shard)));
      auto file = loadContributionShard(path, h, shard);
      QVERIFY2(file.ok(), file.ok() ? "" : file.error().c_str());
      const auto want = decodeContribution(encodeContribution(*cutShard(all, shard), *parseContributionCodec(h.codec)),
                                           *parseContributionCodec(h.codec));
      QVERIFY(want.ok());
      QCOMPARE(file->pieces.size(), want->size());
      for (std::size_t k = 0; k < want->size(); ++k) {
        QCOMPARE(file->pieces[k].first, (*want)[k].first);
        QVERIFY(sameBits(file->pieces[k].second, (*want)[k].second));
      }
    }
    QCOMPARE(int(written->size()), expected + 1);  // and the figures file, last
    QCOMPARE(written->back(), kFiguresFileName);
    QVERIFY(expected < int(shards.size()));
  }

  void anotherShardsOrContributionsFileIsRefused() {
    const auto config = test::shardTestModel();
    const auto shards = planShards(config, 3000);
    QTemporaryDir dir;
    const auto h = header("int8");
    QVERIFY(saveContributionShards(dir.path().toStdString(), h, test::senderDeltas(config, {0, 1}, 4), shards).ok());
    const std::string first = dir.path().toStdString() + "/" + shardFileName(shards[0]);
    auto other = loadContributionShard(first, h, shards[1]);
    QVERIFY(!other.ok());
    QVERIFY2(other.error().find("holds shard") != std::string::npos, other.error().c_str());
    auto later = h;
    later.round += 1;
    QVERIFY(!loadContributionShard(first, later, shards[0]).ok());
    // A plan that cut the same tensors elsewhere names other pieces: refused, never guessed at.
    const auto coarser = planShards(config, 1 << 20);
    QVERIFY(!loadContributionShard(first, h, coarser[0]).ok());
  }

  void aMergedShardReadsBackAndIsTheSameBytesFromEveryReducer() {
    const auto config = test::shardTestModel();
    const auto shards = planShards(config, 3000);
    const Shard& shared = shards[1];
    QVERIFY(shared.expert < 0 && shared.pieces.size() > 1);
    const MergedShardKey key{std::string(64, 'a'), 7, "base-9", shared.id, "0123456789abcdef"};
    MergedShard out{key,
                    {"peer-3"},
                    {"peer-1", "peer-2"},
                    ShardAgreement{0.5, shared.elements(), {0.25, -0.125}, {1.5, 2.5}},
                    shardRows(test::senderDeltas(config, {}, 5), shared)};
    QTemporaryDir dir;
    const std::string a = dir.filePath("a").toStdString(), b = dir.filePath("b").toStdString();
    QVERIFY(saveMergedShard(a, shared, out).ok());
    QVERIFY(saveMergedShard(b, shared, out).ok());
    const auto bytes = [](const std::string& path) {
      std::ifstream in(path, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    QCOMPARE(bytes(a), bytes(b));  // nothing names the reducer: one file, one info-hash
    const std::set<std::string> set{"peer-1", "peer-2", "peer-3"};
    // Its size is one a fetch accepts: one per count of refused senders, whichever they are.
    const auto sizes = mergedShardSizes(shared, key, set);
    QCOMPARE(sizes.size(), std::size_t(4));
    const auto sizeOf = [](const std::string& path) { return std::int64_t(std::filesystem::file_size(path)); };
    QVERIFY(std::count(sizes.begin(), sizes.end(), sizeOf(a)) == 1);
    for (const auto& [refused, merged] :
         std::vector<std::pair<std::set<std::string>, std::vector<std::string>>>{{{}, {"peer-1", "peer-2", "peer-3"}},
                                                                                 {{"peer-1", "peer-2", "peer-3"}, {}},
                                                                                 {{"peer-2"}, {"peer-1", "peer-3"}}}) {
      auto other = out;
      other.refused = refused;
      other.senders = merged;
      other.credit->dot.assign(merged.size(), 0.75);
      other.credit->squares.assign(merged.size(), 1.25);
      QVERIFY(saveMergedShard(b, shared, other).ok());
      QVERIFY2(std::count(sizes.begin(), sizes.end(), sizeOf(b)) == 1, qPrintable(QString::number(sizeOf(b))));
    }
    const Shard& expert = shards.back();
    QVERIFY(expert.expert >= 0);
    const MergedShardKey expertKey{key.run, key.round, key.baseHash, expert.id, key.inputs};
    const MergedShard expertOut{
        expertKey, {}, {"peer-2"}, std::nullopt, shardRows(test::senderDeltas(config, {expert.expert}, 6), expert)};
    QVERIFY(saveMergedShard(b, expert, expertOut).ok());
    const auto expertSizes = mergedShardSizes(expert, expertKey, {"peer-2"});
    QVERIFY(std::count(expertSizes.begin(), expertSizes.end(), sizeOf(b)) == 1);
    QVERIFY(loadMergedShard(b, expertKey, expert, {"peer-2"}).ok());
    auto back = loadMergedShard(a, key, shared, set);
    QVERIFY2(back.ok(), back.ok() ? "" : back.error().c_str());
    QCOMPARE(back->senders, out.senders);
    QCOMPARE(back->refused, out.refused);
    QCOMPARE(back->credit->dot, out.credit->dot);
    QCOMPARE(back->credit->squares, out.credit->squares);
    QCOMPARE(back->credit->updateSquares, 0.5);
    QCOMPARE(back->rows.size(), out.rows.size());
    for (std::size_t k = 0; k < out.rows.size(); ++k) {
      QCOMPARE(back->rows[k].first, out.rows[k].first);
      QVERIFY(sameBits(back->rows[k].second, out.rows[k].second));
    }
    // Refused: another set, another shard, senders that are not the set's.
    auto other = key;
    other.inputs = "fedcba9876543210";
    QVERIFY(!loadMergedShard(a, other, shared, set).ok());
    QVERIFY(!loadMergedShard(a, key, shards[0], set).ok());
    QVERIFY(!loadMergedShard(a, key, shared, {"peer-1", "peer-2"}).ok());
    // Written wrongly: credit for one sender too few, a sender both refused and merged, unsorted
    // senders, a shared shard without credit, a negative sum of squares.
    const auto refusedAsWritten = [&](MergedShard bad) {
      return saveMergedShard(a, shared, bad).ok() && !loadMergedShard(a, key, shared, set).ok();
    };
    auto bad = out;
    bad.credit->dot.pop_back();
    bad.credit->squares.pop_back();
    QVERIFY(refusedAsWritten(bad));
    bad = out;
    bad.refused.insert("peer-1");
    QVERIFY(refusedAsWritten(bad));
    bad = out;
    std::swap(bad.senders[0], bad.senders[1]);
    QVERIFY(refusedAsWritten(bad));
    bad = out;
    bad.credit.reset();
    QVERIFY(refusedAsWritten(bad));
    bad = out;
    bad.credit->squares[0] = -1.0;
    QVERIFY(refusedAsWritten(bad));
    bad = out;
    bad.rows.pop_back();
    QVERIFY(!saveMergedShard(a, shared, bad).ok());  // not the shard's rows: not even written
  }

  void aContributionMissingPartOfAShardIsAnError() {
    const auto config = test::shardTestModel();
    const auto shards = planShards(config, 3000);
    auto all = test::senderDeltas(config, {0, 1}, 4);
    const auto& firstPiece = shards[0].pieces.back().tensor;
    QVERIFY(shards[0].pieces.size() > 1);
    all.erase(std::remove_if(all.begin(), all.end(), [&](const auto& t) { return t.first == firstPiece; }), all.end());
    QTemporaryDir dir;
    QVERIFY(!saveContributionShards(dir.path().toStdString(), header("f32"), all, shards).ok());
  }
};

QTEST_GUILESS_MAIN(ShardFileTest)
#include "tst_shard_file.moc"
