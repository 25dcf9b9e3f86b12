// Specification of a peer's audit draw (core/node/rules/audit_draw.h, issue 38 step 7): A distinct
// shards it does not reduce, every such shard equally likely, another draw for other entropy.
#include "core/node/rules/audit_draw.h"

#include <QtTest>

#include <map>

using namespace es::node;

class AuditDrawTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void aDrawIsDistinctShardsItDoesNotReduce() {
    const std::set<std::size_t> reduced{0, 3, 7};
    for (std::uint64_t entropy = 1; entropy < 200; ++entropy) {
      const auto drawn = drawAudits(21, reduced, 5, entropy);
      QCOMPARE(drawn.size(), std::size_t(5));
      QVERIFY(std::adjacent_find(drawn.begin(), drawn.end()) == drawn.end());  // sorted: distinct
      for (auto s : drawn) QVERIFY(s < 21 && !reduced.count(s));
    }
    QCOMPARE(drawAudits(4, {0, 1}, 5, 9), (std::vector<std::size_t>{2, 3}));  // fewer left: all of them
    QVERIFY(drawAudits(4, {0, 1, 2, 3}, 1, 9).empty());
    QVERIFY(drawAudits(21, {}, 0, 9).empty());
  }

  // Each shard a peer does not reduce is drawn about as often as any other (20,000 draws of one
  // among 18: ~1,111 each, a binomial's spread ~32), and the draw follows the entropy.
  void everyShardIsEquallyLikelyAndTheDrawFollowsTheEntropy() {
    std::map<std::size_t, int> count;
    for (std::uint64_t entropy = 0; entropy < 20000; ++entropy)
      for (auto s : drawAudits(21, {0, 3, 7}, 1, entropy * 0x9e3779b97f4a7c15ull)) ++count[s];
    QCOMPARE(count.size(), std::size_t(18));
    for (const auto& [shard, n] : count) QVERIFY2(n > 950 && n < 1280, qPrintable(QString("%1: %2").arg(shard).arg(n)));
    int same = 0;
    for (std::uint64_t entropy = 0; entropy < 100; ++entropy)
      same += drawAudits(321, {}, 5, entropy) == drawAudits(321, {}, 5, entropy + 1000) ? 1 : 0;
    QVERIFY(same < 3);
    QCOMPARE(drawAudits(321, {}, 5, 42), drawAudits(321, {}, 5, 42));
  }
};

QTEST_GUILESS_MAIN(AuditDrawTest)
#include "tst_audit_draw.moc"
