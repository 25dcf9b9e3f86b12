// Issue 5, acceptance 2: churn. Four peers; one is killed with SIGKILL during round 2. The other
// three close round 2 by the deadline, re-claim the dead peer's experts once its lease is over,
// and keep training.
#include "support/swarm_clients.h"

#include <QTemporaryDir>

#include <algorithm>
#include <set>

using namespace es::test;

class SwarmChurn : public QObject {
  Q_OBJECT

  static constexpr int kPeers = 4;
  static constexpr int kRounds = 7;
  QTemporaryDir dir_;

  // Experts a peer trains at the end: its last "claims" event (the initial claim, then each change).
  static std::set<int> finalClaims(const SwarmClient& p) {
    const auto claims = p.events("claims");
    std::set<int> out;
    if (!claims.empty())
      for (const auto& e : claims.back().value("experts").toArray()) out.insert(e.toInt());
    return out;
  }

 private Q_SLOTS:
  void survivorsCloseTheRoundAndReclaimTheExperts() {
    // Short lease so the test takes minutes, not ten. The deadline's minimum is 40 s: the dead
    // peer is waited for in rounds 2 and 3 anyway, and with 15 s a clean CI run (c34eea2, beside
    // another test) split round 2 three ways (the survivors merged 3, 2 and 1 contributions) and
    // the survivors were not back in step by round 5 — a slow recovery from a 3-way split that is
    // open in the protocol (docs/ROADMAP.md), not what this test is about.
    const auto run = customRun(
        dir_.filePath("run"),
        {{"lease_rounds", 2}, {"deadline", QJsonObject{{"factor", 1.5}, {"min_seconds", 40}, {"max_seconds", 60}}}});
    QVERIFY(!run.isEmpty());
    const QString bootstrap = QString("127.0.0.1:%1").arg(freeLoopbackPort());
    std::vector<std::unique_ptr<SwarmClient>> peers;
    for (int i = 0; i < kPeers; ++i) {
      const auto a = swarmPeerArgs(run, dir_.filePath(QString("peer%1").arg(i)), i, bootstrap, 5, kRounds);
      peers.push_back(std::make_unique<SwarmClient>(QString("peer%1").arg(i), a));
    }
    // Round 1 closes with everyone; then peer 3 dies in round 2.
    QVERIFY2(waitUntil([&] { return peers[3]->rounds().count(1) > 0; }, 200000), "round 1 did not close");
    const auto victimClaims = finalClaims(*peers[3]);
    QVERIFY(!victimClaims.empty());
    peers[3]->kill();
    qInfo("killed peer3 (experts %s) after its round 1", qPrintable(peers[3]->log().filter("Claimed").join(' ')));
    const bool done = waitUntil(
        [&] {
          for (int i = 0; i < kPeers - 1; ++i)
            if (peers[i]->running()) return false;
          return true;
        },
        500000);
    for (int i = 0; i < kPeers - 1; ++i) qInfo().noquote() << peers[i]->name() << peers[i]->log().join("\n  ");
    QVERIFY2(done, "the survivors did not finish");
    std::set<int> covered;
    for (int i = 0; i < kPeers - 1; ++i) {
      auto& p = *peers[i];
      QVERIFY2(p.finishedWith(0), qPrintable(p.name()));
      QCOMPARE(int(p.rounds().size()), kRounds);
      QCOMPARE(p.rounds().at(1).peers, kPeers);
      // Closed by the deadline without the dead peer. Not necessarily with every survivor: on a
      // loaded 2-core machine one survivor's round-2 contribution can come later than another's
      // deadline (seen twice: the clean CI run of the recovered work, and a run beside a build,
      // where peer0 merged 3 and the other two 2 with a 15 s minimum). The agreement step then
      // repairs the split (checked below), which is what the protocol promises.
      QVERIFY(p.rounds().at(2).peers >= 2 && p.rounds().at(2).peers <= kPeers - 1);
      const auto deadlines = p.events("deadline");
      QVERIFY(std::any_of(deadlines.begin(), deadlines.end(), [](auto& d) { return d.value("round").toInt() == 2; }));
      {
        const auto &first = p.rounds().at(1).valLoss, &last = p.rounds().at(kRounds).valLoss;  // eval every round
        QVERIFY(first && last && *last < *first);
      }
      for (int e : finalClaims(p)) covered.insert(e);
    }
    // Within one lease after it expired, the dead peer's experts have live owners again.
    for (int e : victimClaims) QVERIFY2(covered.count(e), qPrintable(QString("expert %1 was not re-claimed").arg(e)));
    QCOMPARE(int(covered.size()), 8);
    // Back in step within two rounds of the lease's end: from round 5 on the survivors merge the
    // same contributions (a split of round 2 is seen from the records in round 3 and repaired by
    // the majority's snapshot before round 4 is trained).
    for (int r = 5; r <= kRounds; ++r)
      for (int i = 1; i < kPeers - 1; ++i) QCOMPARE(peers[i]->rounds().at(r).merged, peers[0]->rounds().at(r).merged);
  }
};

QTEST_GUILESS_MAIN(SwarmChurn)
#include "tst_swarm_churn.moc"
