// Specification of which reducers' merged shard a peer applies (core/node/rules/shard_outputs.h,
// issue 38 design item 4): all waited-for reducers agree → apply; any two differ, or one reducer
// says two things → recompute and ban whoever differs from the recomputation; a withholding
// reducer is replaced in order; outputs for another input set or from outside the order do not
// count; two colluders beside an honest reducer cannot get a wrong shard applied.
#include "core/node/rules/shard_outputs.h"

#include <QTest>

using namespace es::node;

namespace {
const std::vector<std::string> kOrder = {"r1", "r2", "r3", "r4", "r5"};
const std::string kSet = "set-a";
ShardOutput out(const std::string& reducer, const std::string& root, const std::string& set = kSet) {
  return {reducer, set, root};
}
}  // namespace

class ShardOutputsTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void theReducersAgreeingIsApplied() {
    const auto d = decideShard(kOrder, 3, {}, {out("r2", "m"), out("r1", "m"), out("r3", "m"), out("r1", "m")}, kSet);
    QCOMPARE(int(d.verdict), int(ShardVerdict::Apply));
    QCOMPARE(d.outputRoot, std::string("m"));
  }

  void aMissingReducerIsWaitedForThenReplacedInOrder() {
    std::vector<ShardOutput> heard = {out("r1", "m"), out("r2", "m")};
    auto d = decideShard(kOrder, 3, {}, heard, kSet);
    QCOMPARE(int(d.verdict), int(ShardVerdict::Wait));
    QCOMPARE(d.waitingOn, std::vector<std::string>{"r3"});
    d = decideShard(kOrder, 3, {"r3"}, heard, kSet);  // given up on: r4 takes its place
    QCOMPARE(d.waitingOn, std::vector<std::string>{"r4"});
    heard.push_back(out("r4", "m"));
    d = decideShard(kOrder, 3, {"r3"}, heard, kSet);
    QCOMPARE(int(d.verdict), int(ShardVerdict::Apply));
    QCOMPARE(activeReducers(kOrder, 3, {"r1", "r3"}), (std::vector<std::string>{"r2", "r4", "r5"}));
  }

  void fewerCandidatesThanReplicasAllMustDeliver() {
    const std::vector<std::string> two = {"r1", "r2"};
    QCOMPARE(int(decideShard(two, 3, {}, {out("r1", "m")}, kSet).verdict), int(ShardVerdict::Wait));
    QCOMPARE(int(decideShard(two, 3, {}, {out("r1", "m"), out("r2", "m")}, kSet).verdict), int(ShardVerdict::Apply));
  }

  void theOrderUsedUpMeansRecompute() {
    const auto d = decideShard(kOrder, 3, {"r1", "r2", "r3", "r4", "r5"}, {}, kSet);
    QCOMPARE(int(d.verdict), int(ShardVerdict::Recompute));
  }

  void twoCollidersBesideAnHonestReducerForceARecomputeAndAreNamed() {
    const std::vector<ShardOutput> heard = {out("r1", "wrong"), out("r2", "wrong"), out("r3", "right")};
    QCOMPARE(int(decideShard(kOrder, 3, {}, heard, kSet).verdict), int(ShardVerdict::Recompute));
    QCOMPARE(outputLiars(kOrder, heard, kSet, "right"), (std::vector<std::string>{"r1", "r2"}));
    // Before the honest output arrives the colluders are waited on, never applied.
    const auto early = decideShard(kOrder, 3, {}, {out("r1", "wrong"), out("r2", "wrong")}, kSet);
    QCOMPARE(int(early.verdict), int(ShardVerdict::Wait));
  }

  void aReducerSayingTwoThingsIsALiarEvenIfOneIsRight() {
    const std::vector<ShardOutput> heard = {out("r1", "m"), out("r1", "x"), out("r2", "m"), out("r3", "m")};
    QCOMPARE(int(decideShard(kOrder, 3, {}, heard, kSet).verdict), int(ShardVerdict::Recompute));
    QCOMPARE(outputLiars(kOrder, heard, kSet, "m"), std::vector<std::string>{"r1"});
  }

  void outputsForAnotherSetOrFromOutsideTheOrderDoNotCount() {
    const std::vector<ShardOutput> heard = {out("r1", "m"), out("r2", "m"), out("r3", "other", "set-b"),
                                            out("fresh-key", "x")};
    const auto d = decideShard(kOrder, 3, {}, heard, kSet);
    QCOMPARE(int(d.verdict), int(ShardVerdict::Wait));  // no recompute forced, r3 still owed
    QCOMPARE(d.waitingOn, std::vector<std::string>{"r3"});
    QVERIFY(outputLiars(kOrder, heard, kSet, "m").empty());
    // A late replacement that disagrees still counts: it is in the order.
    QCOMPARE(int(decideShard(kOrder, 3, {}, {out("r1", "m"), out("r5", "y")}, kSet).verdict),
             int(ShardVerdict::Recompute));
  }
};

QTEST_GUILESS_MAIN(ShardOutputsTest)
#include "tst_shard_outputs.moc"
