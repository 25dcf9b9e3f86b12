// Issue 38, step 1: the shard plan (core/sync/shard_plan.h) and who reduces each shard
// (reducer_plan.h) — pure rules every peer must compute alike. Every element in exactly one shard,
// none over the size, experts apart; reducers only among senders with merged work, owners first,
// the load even, the same for the same seed and another for another.
#include "core/model/tensor_names.h"
#include "core/sync/fetch_size.h"
#include "core/sync/reducer_plan.h"
#include "core/sync/shard_plan.h"

#include <QtTest>

#include <map>
#include <set>

using namespace es;

namespace {

std::vector<std::string> peers(int n) {
  std::vector<std::string> out;
  for (int p = 0; p < n; ++p) out.push_back("peer-" + std::to_string(100 + p));
  return out;
}

}  // namespace

class ReductionPlanTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void everyElementIsInExactlyOneShard_data() {
    QTest::addColumn<qint64>("maxElements");
    QTest::newRow("whole tensors") << qint64(1 << 22);
    QTest::newRow("rows of the embedding") << qint64(100'000);
    QTest::newRow("a row per shard, almost") << qint64(300);
  }
  void everyElementIsInExactlyOneShard() {
    QFETCH(qint64, maxElements);
    const model::ModelConfig config;
    const auto shards = sync::planShards(config, maxElements);
    std::map<std::string, std::int64_t> covered;  // tensor → rows covered, checked contiguous
    std::set<std::string> ids;
    for (const auto& s : shards) {
      QVERIFY(ids.insert(s.id).second);
      QVERIFY(!s.pieces.empty());
      QVERIFY2(s.elements() <= std::max<std::int64_t>(maxElements, config.dModel * 4), s.id.c_str());
      for (const auto& p : s.pieces) {
        QCOMPARE(p.rowBegin, covered[p.tensor]);  // the next rows of the tensor, none skipped or repeated
        covered[p.tensor] = p.rowEnd;
        const auto expert = model::expertOf(p.tensor);
        QCOMPARE(expert ? expert->expert : -1, s.expert);  // an expert's shard holds only that expert
      }
    }
    std::int64_t total = 0;
    for (const auto& t : sync::modelTensors(config)) {
      std::int64_t rows = 1;
      for (std::size_t d = 0; d + 1 < t.shape.size(); ++d) rows *= t.shape[d];
      QCOMPARE(covered[t.name], t.shape.size() > 1 ? rows : 1);
      std::int64_t n = 1;
      for (auto d : t.shape) n *= d;
      total += n;
    }
    std::int64_t inShards = 0;
    for (const auto& s : shards) inShards += s.elements();
    QCOMPARE(inShards, total);
    QCOMPARE(total, config.totalParameters());
  }

  void theShardSizeFollowsTheSwarm() {
    const model::ModelConfig config;
    QVERIFY(sync::shardElementsFor(config, 64) < sync::shardElementsFor(config, 16));
    QCOMPARE(sync::shardElementsFor(config, 1'000'000), std::int64_t(4096));  // the floor
  }

  void onlySendersWithMergedWorkReduce() {
    const auto ledger = sync::WorkLedger{}.after(1, {"veteran-a", "veteran-b"});
    QCOMPARE(sync::reducerCandidates(ledger), (std::vector<std::string>{"veteran-a", "veteran-b"}));
    QVERIFY(sync::reducerCandidates({}).empty());
    // One merged in neither of the ledger's latest two rounds (it left) reduces nothing next round.
    const auto later = ledger.after(2, {"veteran-b"});
    QCOMPARE(sync::reducerCandidates(later).size(), std::size_t(2));
    QCOMPARE(sync::reducerCandidates(later.after(3, {"veteran-b"})), std::vector<std::string>{"veteran-b"});
  }

  void reducersAreEvenOwnersFirstAndSeeded() {
    const model::ModelConfig config;
    const int n = 16, replicas = 3;
    const auto shards = sync::planShards(config, sync::shardElementsFor(config, n));
    const auto candidates = peers(n);
    std::map<int, std::set<std::string>> owners{{2, {"peer-107", "peer-113"}}};
    const auto plan = sync::assignReducers(shards, candidates, owners, "fingerprint-1", replicas);
    QCOMPARE(plan.size(), shards.size());
    std::map<std::string, std::int64_t> load;
    std::int64_t total = 0, largest = 0;
    for (std::size_t s = 0; s < shards.size(); ++s) {
      QCOMPARE(int(plan[s].size()), n);  // every candidate, reducers first: the rest replace them
      QCOMPARE(std::set<std::string>(plan[s].begin(), plan[s].end()).size(), std::size_t(n));
      if (shards[s].expert == 2) QCOMPARE((std::set<std::string>{plan[s][0], plan[s][1]}), owners.at(2));
      for (int k = 0; k < replicas; ++k) load[plan[s][k]] += shards[s].elements();
      total += shards[s].elements() * replicas;
      largest = std::max(largest, shards[s].elements());
    }
    std::int64_t busiest = 0;
    for (const auto& [peer, elements] : load) busiest = std::max(busiest, elements);
    // Dealt to the least loaded: the busiest holds at most one shard more than an even share
    // (owners aside: they take their expert's shards whatever their load).
    QVERIFY2(busiest <= total / n + 2 * largest,
             qPrintable(QString("busiest %1, mean %2").arg(busiest).arg(total / n)));
    QCOMPARE(sync::assignReducers(shards, candidates, owners, "fingerprint-1", replicas), plan);
    QVERIFY(sync::assignReducers(shards, candidates, owners, "fingerprint-2", replicas) != plan);
  }
};

QTEST_GUILESS_MAIN(ReductionPlanTest)
#include "tst_reduction_plan.moc"
