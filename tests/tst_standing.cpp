// Specification of votes weighted by accepted work (core/node/rules/standing.h; issue 15 item 1,
// "Sybil majorities"): fresh keys that agree on a snapshot of their own do not outvote the peers
// we merged with, two keys are still needed, and standing survives a restart via the ledger.
#include "core/node/rules/standing.h"
#include "core/store/ledger.h"
#include "support/id_literals.h"

#include <QTemporaryDir>
#include <QTest>

using namespace es::node;
using es::test::operator""_peer;
using es::test::operator""_content;

namespace {

const std::string kMigrations = std::string(ES_SHARE_DIR) + "/sql";

// Three honest peers that each contributed to 10 of our rounds.
Standing honestStanding() { return {{"honest-a"_peer, 10}, {"honest-b"_peer, 10}, {"honest-c"_peer, 10}}; }

SnapshotBallot ballot(std::int64_t oldest, std::int64_t newest) {
  SnapshotBallot b;
  b.oldest = oldest;
  b.newest = newest;
  return b;
}

}  // namespace

class StandingTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void aFreshKeyWeighsOneAndStandingIsCapped() {
    const Standing s{{"worker"_peer, 5}, {"veteran"_peer, 10'000}, {"negative"_peer, -3}};
    QCOMPARE(voteWeight(s, "stranger"_peer), std::int64_t{1});
    QCOMPARE(voteWeight(s, "worker"_peer), std::int64_t{6});
    QCOMPARE(voteWeight(s, "veteran"_peer), 1 + kStandingCap);
    QCOMPARE(voteWeight(s, "negative"_peer), std::int64_t{1});
    QCOMPARE(totalWeight(s, {"worker"_peer, "stranger"_peer}), std::int64_t{7});
  }

  // The attack: two (or three) Sybil keys announce a newer snapshot of their own making. Counting
  // keys, the newest snapshot with two announcers won; weighted, the honest one does.
  void sybilKeysDoNotOutvoteThePeersWeMergedWith() {
    auto b = ballot(8, 12);
    b.votes[{10, "honest-state"_content}] = {"honest-a"_peer, "honest-b"_peer, "honest-c"_peer};
    b.votes[{12, "sybil-state"_content}] = {"sybil-1"_peer, "sybil-2"_peer, "sybil-3"_peer};
    const auto choice = chooseSnapshot(b, honestStanding());
    QVERIFY(choice);
    QCOMPARE(choice->contentId, "honest-state"_content);
    QCOMPARE(choice->announcers, 3);
    QCOMPARE(choice->weight, std::int64_t{33});
    // Without standing (a newcomer's view) keys are all there is: the newest with half the keys.
    const auto newcomer = chooseSnapshot(b, {});
    QVERIFY(newcomer);
    QCOMPARE(newcomer->contentId, "sybil-state"_content);
  }

  // The newcomer's case with anchors (swarm.anchors): one anchor among two honest announcers
  // outweighs five fresh Sybil keys with a newer snapshot, to a peer that has merged nothing; an
  // anchor's earned standing is not lowered; without anchors the Sybils' keys win as above.
  void anAnchorOutweighsFreshKeysForANewcomer() {
    auto b = ballot(8, 12);
    b.votes[{10, "honest-state"_content}] = {"anchor"_peer, "honest-b"_peer};
    b.votes[{12, "sybil-state"_content}] = {"sybil-1"_peer, "sybil-2"_peer, "sybil-3"_peer, "sybil-4"_peer,
                                            "sybil-5"_peer};
    Standing newcomer;
    anchorStanding(newcomer, {"anchor"_peer});
    QCOMPARE(voteWeight(newcomer, "anchor"_peer), 1 + kStandingCap);
    const auto choice = chooseSnapshot(b, newcomer);
    QVERIFY(choice);
    QCOMPARE(choice->contentId, "honest-state"_content);
    QCOMPARE(chooseSnapshot(b, {})->contentId, "sybil-state"_content);
    // A lone anchor is still one announcer: two are needed while others announce too — and the
    // five keys weigh 5 of 70, so nothing is chosen (the newcomer waits).
    b.votes[{10, "honest-state"_content}] = {"anchor"_peer};
    QVERIFY(!chooseSnapshot(b, newcomer));
    Standing veteran{{"anchor"_peer, 10'000}};
    anchorStanding(veteran, {"anchor"_peer});
    QCOMPARE(veteran.at("anchor"_peer), std::int64_t{10'000});
  }

  // Sybils that did as much accepted work as the honest peers weigh as much: standing is bought
  // with work, not keys.
  void sybilsThatDidTheWorkWeighAsMuch() {
    auto b = ballot(8, 12);
    b.votes[{10, "honest-state"_content}] = {"honest-a"_peer, "honest-b"_peer};
    b.votes[{12, "other-state"_content}] = {"worker-1"_peer, "worker-2"_peer};
    const Standing s{{"honest-a"_peer, 4}, {"honest-b"_peer, 4}, {"worker-1"_peer, 4}, {"worker-2"_peer, 4}};
    QCOMPARE(chooseSnapshot(b, s)->contentId, "other-state"_content);
  }

  // Within one round the heaviest state wins, whatever the key count.
  void withinARoundTheHeaviestWins() {
    auto b = ballot(10, 10);
    b.votes[{10, "honest-state"_content}] = {"honest-a"_peer, "honest-b"_peer};
    b.votes[{10, "sybil-state"_content}] = {"sybil-1"_peer, "sybil-2"_peer, "sybil-3"_peer, "sybil-4"_peer};
    QCOMPARE(chooseSnapshot(b, honestStanding())->contentId, "honest-state"_content);
  }

  // One key alone never feeds us a state while another key announces snapshots, however heavy it
  // is; alone in the swarm, it may (a swarm of two).
  void oneAnnouncerIsEnoughOnlyWhenItIsTheOnlyOne() {
    auto b = ballot(0, 20);
    b.votes[{12, "solo-state"_content}] = {"honest-a"_peer};
    QCOMPARE(chooseSnapshot(b, honestStanding())->contentId, "solo-state"_content);
    b.votes[{10, "other-state"_content}] = {"sybil-1"_peer};
    QVERIFY(!chooseSnapshot(b, honestStanding()));
  }

  // Rounds outside [oldest, newest] are not adoptable; a stalled transfer is tried only when no
  // other candidate qualifies.
  void boundsAndStalledTransfers() {
    auto b = ballot(5, 11);
    b.votes[{12, "too-new"_content}] = {"honest-a"_peer, "honest-b"_peer, "honest-c"_peer};
    b.votes[{4, "too-old"_content}] = {"honest-a"_peer, "honest-b"_peer, "honest-c"_peer};
    QVERIFY(!chooseSnapshot(b, honestStanding()));
    b.votes[{10, "stalled"_content}] = {"honest-a"_peer, "honest-b"_peer, "honest-c"_peer};
    b.votes[{8, "older"_content}] = {"honest-a"_peer, "honest-b"_peer, "honest-c"_peer};
    b.stalled = {"stalled"_content};
    QCOMPARE(chooseSnapshot(b, honestStanding())->contentId, "older"_content);
    b.votes.erase({8, "older"_content});
    QCOMPARE(chooseSnapshot(b, honestStanding())->contentId, "stalled"_content);
  }

  // The ledger's verdicts are the standing after a restart: accepted rounds count, rejected and
  // stale ones and other runs do not.
  void standingSurvivesARestart() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    {
      auto ledger = es::store::Ledger::open(path, kMigrations);
      QVERIFY2(ledger.ok(), ledger.ok() ? "" : ledger.error().c_str());
      (*ledger)->joinRun("run-1", "default");
      (*ledger)->joinRun("run-2", "other");
      for (int round = 1; round <= 3; ++round)
        (*ledger)->addContribution("run-1", {round, "peer-a", "id", 10, "accepted", ""});
      (*ledger)->addContribution("run-1", {1, "peer-b", "id", 10, "accepted", ""});
      (*ledger)->addContribution("run-1", {2, "peer-b", "id", 10, "stale", ""});
      (*ledger)->addContribution("run-1", {3, "peer-c", "id", 10, "rejected", "norm"});
      (*ledger)->addContribution("run-2", {1, "peer-c", "id", 10, "accepted", ""});
      QVERIFY((*ledger)->flush().ok());
    }
    auto standing = loadStanding(path, "run-1");
    QVERIFY2(standing.ok(), standing.ok() ? "" : standing.error().c_str());
    QCOMPARE(*standing, (Standing{{"peer-a"_peer, 3}, {"peer-b"_peer, 1}}));
  }
};

QTEST_APPLESS_MAIN(StandingTest)
#include "tst_standing.moc"
