// Specification of the switch between all-to-all and sharded rounds (core/sync/round_topology.h,
// issue 38 item 5) and of the byte model it stands on (reduction_bytes.h): a small swarm stays
// all-to-all, a large one shards — for the bundled model from 16 senders with merged work, for
// gpu-1b (run_create.cpp's preset, ~1 B parameters in its bench shape) from 35 — both ways as the ledger grows and
// shrinks; fresh keys count for nothing; a sparse run never shards; the plan and orders are reducer_plan.h's for the
// agreed inputs, each shard reduced by its first R.
#include "core/sync/reducer_plan.h"
#include "core/sync/reduction_bytes.h"
#include "core/sync/round_topology.h"

#include <QElapsedTimer>
#include <QtTest>

using namespace es;

namespace {

std::vector<std::string> names(int n, const char* prefix = "veteran-") {
  std::vector<std::string> out;
  for (int p = 0; p < n; ++p) out.push_back(prefix + std::to_string(100 + p));
  return out;
}

// A ledger in which `n` senders each had one contribution merged.
sync::WorkLedger ledgerOf(int n) { return sync::WorkLedger{}.after(1, names(n)); }

model::ModelConfig gpu1b() {  // run_create.cpp's gpu-1b preset
  model::ModelConfig c;
  c.dModel = 1024, c.nLayers = 12, c.nHeads = 16, c.nExperts = 16, c.expertHidden = 1536, c.seqLen = 1024;
  return c;
}

// The smallest peer count from which sharding pays up to `upTo` peers (0: it never starts).
int firstPaying(const model::ModelConfig& config, int upTo) {
  int first = 0;
  for (int n = 2; n <= upTo; ++n) {
    const bool pays = sync::shardingPays(config, n, 3, 1);
    if (pays && !first) first = n;
    if (!pays) first = 0;  // it must keep paying once it does
  }
  return first;
}

}  // namespace

class RoundTopologyTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // The byte model's own check: all-to-all grows with N (each peer receives every other's file),
  // the sharded busiest peer does not (bench/reduction_scale: ≤ 1.25 × from 16 to 64).
  void theByteModelIsFlatWhereAllToAllGrows() {
    const model::ModelConfig config;
    const auto at = [&](int n) {
      const auto claims = sync::evenClaims(n, config.nExperts);
      return std::pair{sync::allToAllBytes(config, claims).mostReceived(),
                       sync::shardedBytes(config, claims, 3, 1).mostReceived()};
    };
    const auto [a16, s16] = at(16);
    const auto [a64, s64] = at(64);
    QVERIFY(double(a64) > 3.5 * double(a16));
    QVERIFY2(double(s64) <= 1.25 * double(s16), qPrintable(QString("%1 / %2").arg(s64).arg(s16)));
  }

  // Measured, not chosen: where the switch flips for each model.
  void shardingPaysFromAboutSixteenPeersForTheBundledModelAndLaterForABiggerOne() {
    const int bundled = firstPaying(model::ModelConfig(), 40);
    const int bigger = firstPaying(gpu1b(), 64);
    qInfo("sharding pays from %d peers for the bundled model, from %d for gpu-1b", bundled, bigger);
    QVERIFY2(bundled >= 8 && bundled <= 16, qPrintable(QString::number(bundled)));  // measured 15
    QVERIFY2(bigger > 32 && bigger <= 64, qPrintable(QString::number(bigger)));     // measured 35
    QVERIFY(!sync::shardingPays(model::ModelConfig(), 3, 3, 1));                    // never with every peer a reducer
  }

  void theSwitchFollowsTheLedgerBothWays() {
    const model::ModelConfig config;
    const sync::ReductionPolicy policy;
    auto topology = sync::roundTopology(config, ledgerOf(4), {}, "seed", policy, true);
    QVERIFY2(!topology.sharded, topology.why.c_str());
    QVERIFY(topology.plan.empty() && topology.orders.empty());
    topology = sync::roundTopology(config, ledgerOf(24), {}, "seed", policy, true);
    QVERIFY2(topology.sharded, topology.why.c_str());
    qInfo("%s", topology.why.c_str());
    // Peers leave: two rounds that merged four senders make the next all-to-all again, though the
    // others stay in the ledger (for kForgetRounds, work_ledger.h).
    const auto shrunk = ledgerOf(24).after(2, names(4)).after(3, names(4));
    QCOMPARE(shrunk.size(), std::size_t(24));
    QCOMPARE(sync::reducerCandidates(shrunk).size(), std::size_t(4));
    QVERIFY(!sync::roundTopology(config, shrunk, {}, "seed", policy, true).sharded);
  }

  // Fresh keys have no merged work: a thousand of them beside four veterans leave the round
  // all-to-all and never become reducers.
  void freshKeysNeitherFlipTheSwitchNorReduce() {
    const model::ModelConfig config;
    std::map<int, std::set<std::string>> owners;
    for (const auto& key : names(1000, "fresh-")) owners[0].insert(key);
    QVERIFY(!sync::roundTopology(config, ledgerOf(4), owners, "seed", {}, true).sharded);
    const auto topology = sync::roundTopology(config, ledgerOf(20), owners, "seed", {}, true);
    QVERIFY(topology.sharded);
    for (const auto& order : topology.orders)
      for (const auto& peer : order) QVERIFY2(peer.rfind("veteran-", 0) == 0, peer.c_str());
  }

  // A run may shard from a set number of senders whatever the bytes (the netlab, the bench at small
  // N) — never with every sender a reducer.
  void aRunCanShardFromASetNumberOfSenders() {
    const model::ModelConfig config;
    sync::ReductionPolicy policy;
    policy.shardFrom = 4;
    QVERIFY(!sync::roundTopology(config, ledgerOf(3), {}, "seed", policy, true).sharded);
    const auto four = sync::roundTopology(config, ledgerOf(4), {}, "seed", policy, true);
    QVERIFY2(four.sharded, four.why.c_str());
    QCOMPARE(four.plan.size(), sync::planShards(config, sync::shardElementsFor(config, 4)).size());
    policy.shardFrom = 2;  // 2 senders, 3 reducers a shard: every one would reduce everything
    QVERIFY(!sync::roundTopology(config, ledgerOf(3), {}, "seed", policy, true).sharded);
    QVERIFY(!sync::roundTopology(config, ledgerOf(8), {}, "seed", policy, false).sharded);  // sparse
  }

  void aSparseRunStaysAllToAll() {
    const auto topology = sync::roundTopology(model::ModelConfig(), ledgerOf(64), {}, "seed", {}, false);
    QVERIFY(!topology.sharded);
    QVERIFY(topology.why.find("sparse") != std::string::npos);
  }

  // The plan and orders are reducer_plan.h's for the agreed inputs; each peer's shards are those
  // it is among the first R of, so every shard has R reducers among them.
  void thePlanIsTheAgreedInputsAndEachShardHasItsReducers() {
    const model::ModelConfig config;
    const auto ledger = ledgerOf(20);
    std::map<int, std::set<std::string>> owners{{2, {"veteran-105"}}};
    const auto topology = sync::roundTopology(config, ledger, owners, "fingerprint", {}, true);
    QVERIFY(topology.sharded);
    const auto plan = sync::planShards(config, sync::shardElementsFor(config, 20));
    QCOMPARE(topology.plan.size(), plan.size());
    QCOMPARE(topology.orders, sync::assignReducers(plan, sync::reducerCandidates(ledger), owners, "fingerprint", 3));
    std::map<std::string, int> reducersOf;
    for (const auto& peer : names(20))
      for (const auto& shard : topology.shardsReducedBy(peer, 3)) ++reducersOf[shard];
    QCOMPARE(reducersOf.size(), plan.size());
    for (const auto& [shard, count] : reducersOf) QCOMPARE(count, 3);
    QVERIFY(sync::roundTopology(config, ledger, owners, "another", {}, true).orders != topology.orders);
  }

  // Protocol step 2 at the close: reducers that sent nothing to the round (killed, gone; here two
  // of them) are replaced by the next of each order that did; each shard keeps R reducers, all of
  // them senders, in the order's own sequence; an order none of whose peers sent keeps its reducers.
  void reducersMissingFromTheClosedSetAreReplacedInOrder() {
    const model::ModelConfig config;
    const auto topology = sync::roundTopology(config, ledgerOf(20), {}, "fingerprint", {}, true);
    QVERIFY(topology.sharded);
    const std::set<std::string> gone{topology.orders[0][0], topology.orders[1][1]};  // a reducer of each
    std::set<std::string> senders;
    for (const auto& peer : names(20))
      if (!gone.count(peer)) senders.insert(peer);
    const auto closed = topology.withReducersAmong(senders);
    QCOMPARE(closed.orders[0][0], topology.orders[0][1]);  // the next in order moved up
    QCOMPARE(closed.plan.size(), topology.plan.size());
    for (std::size_t s = 0; s < topology.orders.size(); ++s) {
      std::vector<std::string> want;
      for (const auto& peer : topology.orders[s])
        if (senders.count(peer)) want.push_back(peer);
      QCOMPARE(closed.orders[s], want);
    }
    std::map<std::string, int> reducersOf;
    for (const auto& peer : names(20))
      for (const auto& shard : closed.shardsReducedBy(peer, 3)) {
        QVERIFY2(senders.count(peer), qPrintable(QString::fromStdString(peer) + " reduces, and sent nothing"));
        ++reducersOf[shard];
      }
    for (const auto& [shard, count] : reducersOf) QCOMPARE(count, 3);
    QCOMPARE(topology.withReducersAmong({"nobody-here"}).orders, topology.orders);
    const auto everyone = names(20);
    QCOMPARE(topology.withReducersAmong({everyone.begin(), everyone.end()}).orders, topology.orders);
  }

  // Every peer decides every round (its time: printed; speed targets live in bench/).
  void decidesTheLargestModelledSwarm() {
    QElapsedTimer timer;
    timer.start();
    const auto topology = sync::roundTopology(model::ModelConfig(), ledgerOf(256), {}, "seed", {}, true);
    QVERIFY(topology.sharded);
    qInfo("deciding a 256-peer round: %lld ms", timer.elapsed());
  }
};

QTEST_GUILESS_MAIN(RoundTopologyTest)
#include "tst_round_topology.moc"
