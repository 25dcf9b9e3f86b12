// The pre-flight memory check (core/node/node.h expertBudget): how many experts a peer can claim.
#include "core/node/node.h"

#include <QtTest>

using es::node::expertBudget;

class ExpertBudgetTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void countsWhatFitsAfterTheWholeModel() {
    // 1000 parameters in all, 8 experts of 100 (all layers): shared = 200.
    const auto b = expertBudget(1000, 100, 8, 1'000'000);
    QCOMPARE(b.fixedBytes, std::int64_t(1000 * 16 + 200 * 12));
    QCOMPARE(b.perExpertBytes, std::int64_t(1200));
    QCOMPARE(b.experts, 8);  // plenty: capped at the number of experts
    const auto tight = expertBudget(1000, 100, 8, b.fixedBytes + 3 * 1200 + 1199);
    QCOMPARE(tight.experts, 3);
  }

  void nothingFitsBelowTheFixedPart() {
    QCOMPARE(expertBudget(1000, 100, 8, 100).experts, 0);
    QCOMPARE(expertBudget(1000, 100, 8, 0).experts, 0);
  }

  void theDefaultRunFitsAllExpertsInAFewHundredMegabytes() {
    // Default model: 15.7 M parameters; 8 experts × 4 layers × 393 K.
    const auto b = expertBudget(15'728'640, 4 * 393'216, 8, 2LL << 30);
    QCOMPARE(b.experts, 8);
    QVERIFY(b.fixedBytes < 400LL << 20);
  }
};

QTEST_APPLESS_MAIN(ExpertBudgetTest)
#include "tst_expert_budget.moc"
