// Specification of the weighted-majority vote on a round's merged state (core/node/rules/majority.h),
// which the agreement check and closing on the swarm's set both ask: weight is standing, not head
// count; those still gathering count against every group; without them the heaviest group may win
// (when the caller allows it); ties go to the smaller fingerprint.
#include "core/node/rules/majority.h"
#include "support/id_literals.h"

#include <QTest>

using namespace es::node;
using es::test::operator""_peer;

class MajorityTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void nobodyReportingDecidesNothing() {
    StateBallot ballot;
    ballot.gathering = {"a"_peer};
    QVERIFY(!decideMajority(ballot, {}, true));
    QVERIFY(!decideMajority(ballot, {}, false));
  }

  void moreThanHalfOfTheWeightDecides() {
    StateBallot ballot;
    ballot.reports["s1"] = {"a"_peer, "b"_peer};
    ballot.reports["s2"] = {"c"_peer};
    const auto group = decideMajority(ballot, {}, false);
    QVERIFY(group);
    QCOMPARE(group->fingerprint, std::string("s1"));
    QCOMPARE(group->members, (std::set<es::PeerId>{"a"_peer, "b"_peer}));
  }

  void gatherersCountAgainstEveryGroup() {
    StateBallot ballot;
    ballot.reports["s1"] = {"a"_peer, "b"_peer};
    ballot.gathering = {"c"_peer, "d"_peer};
    QVERIFY(!decideMajority(ballot, {}, false));  // 2 of 4: not more than half
    QVERIFY(!decideMajority(ballot, {}, true));   // someone still gathers: the heaviest does not win yet
    ballot.gathering = {"c"_peer};
    QVERIFY(decideMajority(ballot, {}, false));  // 2 of 3
  }

  void withoutGatherersTheHeaviestWinsOnlyWhenAllowed() {
    StateBallot ballot;
    ballot.reports["s1"] = {"a"_peer};
    ballot.reports["s2"] = {"b"_peer};
    ballot.reports["s3"] = {"c"_peer};
    QVERIFY(!decideMajority(ballot, {}, false));
    const auto group = decideMajority(ballot, {}, true);
    QVERIFY(group);
    QCOMPARE(group->fingerprint, std::string("s1"));  // a three-way tie: the smaller fingerprint
  }

  // A peer that merged the round and went on (its record no longer names it) is unknown, not
  // absent: a one-against-one tie is not decided while it counts.
  void aPeerPastTheRoundKeepsATieOpen() {
    StateBallot ballot;
    ballot.reports["ours"] = {"b"_peer};
    ballot.reports["a-stale"] = {"a"_peer};
    QCOMPARE(decideMajority(ballot, {}, true)->fingerprint, std::string("a-stale"));  // the tie rule
    ballot.passed = {"c"_peer};
    QVERIFY(!decideMajority(ballot, {}, true));
    ballot.reports["ours"].insert("d"_peer);  // 2 of 4: still not more than half
    QVERIFY(!decideMajority(ballot, {}, true));
    ballot.reports["ours"].insert("e"_peer);  // 3 of 5
    QCOMPARE(decideMajority(ballot, {}, true)->fingerprint, std::string("ours"));
  }

  void standingOutweighsHeadCount() {
    // Three fresh keys against one peer whose work we merged in 5 rounds (weight 6 vs 3).
    StateBallot ballot;
    ballot.reports["honest"] = {"h"_peer};
    ballot.reports["sybil"] = {"x1"_peer, "x2"_peer, "x3"_peer};
    const Standing standing{{"h"_peer, 5}};
    const auto group = decideMajority(ballot, standing, false);
    QVERIFY(group);
    QCOMPARE(group->fingerprint, std::string("honest"));
    // Counted by heads the keys would have won.
    QCOMPARE(decideMajority(ballot, {}, false)->fingerprint, std::string("sybil"));
  }
};

QTEST_GUILESS_MAIN(MajorityTest)
#include "tst_majority.moc"
