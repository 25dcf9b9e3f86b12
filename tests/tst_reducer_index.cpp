// Specification of a reducer's index of a sharded round (core/node/reducer_index.h, issue 38
// step 5): what it writes reads back as it was and as shard_outputs.h's rule hears it; a file is
// read only for its round, state and reducer, with plan shards in plan order, each once, in the
// format's one spelling and within the plan's size bound.
#include "core/node/reducer_index.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>

using namespace es;
using namespace es::node;

namespace {

const std::vector<std::string> kPlan = {"s0", "s1", "s2", "e0", "e1"};

ReducerIndex sample() {
  ReducerIndex index;
  index.key = {std::string(64, 'a'), 7, "0123456789abcdef", PeerId(std::string(40, 'b'))};
  index.outputs = {{"s1", "00112233445566ff", ContentId(std::string(64, 'c'))},
                   {"e0", "00112233445566ff", ContentId(std::string(64, 'd'))}};
  return index;
}

}  // namespace

class ReducerIndexTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

  std::string path(const char* name) const { return dir_.filePath(name).toStdString(); }

  // Writes `bytes` and reads them as sample()'s key expects.
  Expected<ReducerIndex> read(const QByteArray& bytes, const ReducerIndexKey& key = sample().key) {
    QFile file(dir_.filePath("raw.json"));
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) || file.write(bytes) != bytes.size())
      qFatal("cannot write the test file");
    file.close();
    return loadReducerIndex(path("raw.json"), key, kPlan);
  }

 private Q_SLOTS:
  void whatIsWrittenReadsBackAndIsHeardByTheRule() {
    const auto index = sample();
    QVERIFY(saveReducerIndex(path("index.json"), index, kPlan).ok());
    const auto back = loadReducerIndex(path("index.json"), index.key, kPlan);
    QVERIFY2(back.ok(), back.ok() ? "" : back.error().c_str());
    QVERIFY(back->outputs == index.outputs);
    const auto heard = shardOutputsOf(*back);
    QCOMPARE(heard.size(), std::size_t(2));
    QCOMPARE(heard[1].first, std::string("e0"));
    QCOMPARE(heard[1].second.reducer, index.key.reducer.str());
    QCOMPARE(heard[1].second.inputDigest, std::string("00112233445566ff"));
    QCOMPARE(heard[1].second.outputRoot, std::string(64, 'd'));
    QCOMPARE(reducerIndexFileName(7), std::string("outputs-7.json"));
  }

  void onlyItsRoundStateAndReducerRead() {
    QVERIFY(saveReducerIndex(path("index.json"), sample(), kPlan).ok());
    for (int field = 0; field < 4; ++field) {
      auto key = sample().key;
      if (field == 0) key.run = std::string(64, 'e');
      if (field == 1) key.round = 8;
      if (field == 2) key.baseHash = "fedcba9876543210";
      if (field == 3) key.reducer = PeerId(std::string(40, 'f'));
      const auto refused = loadReducerIndex(path("index.json"), key, kPlan);
      QVERIFY2(!refused.ok() && refused.error().find("not the index of this round") != std::string::npos,
               qPrintable(QString::number(field)));
    }
  }

  void outputsOutsideThePlanOrItsOrderAreNeitherWrittenNorRead() {
    auto index = sample();
    std::swap(index.outputs[0], index.outputs[1]);
    QVERIFY(!reducerIndexBytes(index, kPlan).ok());
    index = sample();
    index.outputs.push_back(index.outputs.back());
    QVERIFY(!reducerIndexBytes(index, kPlan).ok());
    index = sample();
    index.outputs[0].shard = "s9";
    QVERIFY(!reducerIndexBytes(index, kPlan).ok());
    // The same from a hand-made file: the reader checks it too.
    const QByteArray good = *reducerIndexBytes(sample(), kPlan);
    QVERIFY(read(good).ok());
    QByteArray swapped = good;
    swapped.replace("\"s1\"", "\"@@\"").replace("\"e0\"", "\"s1\"").replace("\"@@\"", "\"e0\"");
    QVERIFY(read(swapped).error().find("out of plan order") != std::string::npos);
    QVERIFY(read(QByteArray(good).replace("\"e0\"", "\"s1\"")).error().find("repeated") != std::string::npos);
    QVERIFY(read(QByteArray(good).replace("\"e0\"", "\"e7\"")).error().find("not in the round") != std::string::npos);
  }

  void oneSpellingOnly() {
    const QByteArray good = *reducerIndexBytes(sample(), kPlan);
    QVERIFY(read(good).ok());
    QVERIFY(read(good + "\n").error().find("one spelling") != std::string::npos);
    QVERIFY(read(QByteArray(good).replace(",\"format\"", ", \"format\"")).error().find("one spelling") !=
            std::string::npos);
    QVERIFY(read(QByteArray(good).replace("\"round\":7", "\"round\":7.0")).error().find("one spelling") !=
            std::string::npos);
  }

  void malformedFieldsAreRefused() {
    const QByteArray good = *reducerIndexBytes(sample(), kPlan);
    const std::vector<std::pair<QByteArray, QByteArray>> edits = {
        {"\"round\":7", "\"round\":-7"},
        {"\"round\":7", "\"round\":\"7\""},
        {"00112233445566ff", "00112233445566FF"},
        {"00112233445566ff", "00112233445566"},
        {QByteArray(64, 'd'), QByteArray(63, 'd')},
        {"expertswarm-reducer-index", "expertswarm-figures"},
        {"\"run\"", "\"runs\""},
        {"[\"s1\",", "[[\"s1\"],"},
        {"{", "{\"extra\":1,"},
    };
    for (const auto& [from, to] : edits) {
      const auto refused = read(QByteArray(good).replace(from, to));
      QVERIFY2(!refused.ok(), to.constData());
    }
    QVERIFY(read("[]").error().find("not a JSON object") != std::string::npos);
    QVERIFY(read(QByteArray(200, '[')).error().find("deeper") != std::string::npos);
  }

  // The bound a fetch gets holds every index of the plan's size and refuses a bigger file
  // unread.
  void theSizeBoundHoldsAFullIndexAndRefusesMore() {
    std::vector<std::string> plan;
    ReducerIndex full = sample();
    full.outputs.clear();
    for (int i = 0; i < 1281; ++i) {  // the bundled model's plan at 256 peers
      plan.push_back((i < 257 ? "s" : "e") + std::to_string(i));
      full.outputs.push_back({plan.back(), "00112233445566ff", ContentId(std::string(64, 'c'))});
    }
    const auto bytes = reducerIndexBytes(full, plan);
    QVERIFY(bytes.ok());
    QVERIFY(bytes->size() <= reducerIndexMaxBytes(plan.size()));
    qInfo("a full index of %zu shards: %lld bytes (bound %lld)", plan.size(), qint64(bytes->size()),
          qint64(reducerIndexMaxBytes(plan.size())));
    const auto over = read(QByteArray(int(reducerIndexMaxBytes(kPlan.size())) + 1, ' '));
    QVERIFY(over.error().find("more than the round's plan allows") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(ReducerIndexTest)
#include "tst_reducer_index.moc"
