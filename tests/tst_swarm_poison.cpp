// Issue 5, acceptance 5: three lying peers (a NaN, a 10⁶× update, an expert they do not own)
// among two honest ones. Every honest peer rejects each lie, bans its sender with the reason in
// its SQLite ledger, and trains on.
#include "core/store/ledger.h"
#include "support/swarm_clients.h"

#include <QTemporaryDir>

using namespace es::test;

class SwarmPoison : public QObject {
  Q_OBJECT

  static constexpr int kRounds = 3;
  QTemporaryDir dir_;

 private Q_SLOTS:
  void honestPeersRejectAndBanEveryLie() {
    const auto run = customRun(dir_.filePath("run"),
                               {{"deadline", QJsonObject{{"factor", 2.0}, {"min_seconds", 10}, {"max_seconds", 60}}}});
    const QString bootstrap = QString("127.0.0.1:%1").arg(freeLoopbackPort());
    const QStringList kinds{"", "", "nan", "norm", "foreign"};
    std::vector<std::unique_ptr<SwarmClient>> peers;
    for (int i = 0; i < kinds.size(); ++i) {
      auto a = swarmPeerArgs(run, dir_.filePath(QString("peer%1").arg(i)), i, bootstrap, 4, kRounds);
      if (!kinds[i].isEmpty()) a << "--test-poison" << kinds[i];
      peers.push_back(std::make_unique<SwarmClient>(kinds[i].isEmpty() ? QString("honest%1").arg(i) : kinds[i], a));
    }
    const bool done = waitUntil([&] { return !peers[0]->running() && !peers[1]->running(); }, 500000);
    for (auto& p : peers) qInfo().noquote() << p->name() << p->log().filter("reject").join("\n  ");
    QVERIFY2(done, "the honest peers did not finish");
    const auto runId = peers[0]->runId().toStdString();
    for (int i = 0; i < 2; ++i) {
      auto& p = *peers[i];
      QVERIFY2(p.finishedWith(0), qPrintable(p.name()));
      QCOMPARE(int(p.rounds().size()), kRounds);
      QCOMPARE(p.rounds().at(1).peers, 2);  // only the two honest contributions were merged
      {
        const auto &first = p.rounds().at(1).valLoss, &last = p.rounds().at(kRounds).valLoss;  // eval every round
        QVERIFY(first && last && *last < *first);
      }
      auto reader = es::store::LedgerReader::open(dir_.filePath(QString("peer%1/expertswarm.db").arg(i)).toStdString());
      QVERIFY(reader.ok());
      const auto banned = (*reader)->bannedPeers(runId);
      QVERIFY(banned.ok());
      QStringList reasons;
      for (const auto& b : *banned) reasons << QString::fromStdString(b.banReason);
      qInfo() << p.name() << "banned:" << reasons;
      QCOMPARE(int(banned->size()), 3);
      QVERIFY(reasons.join('|').contains("finite") || reasons.join('|').contains("NaN") ||
              reasons.join('|').contains("nan"));
      QVERIFY(reasons.join('|').contains("the most AdamW moves it"));  // "norm" (×10⁶): over the update ceiling
      QVERIFY(reasons.join('|').contains("expert") || reasons.join('|').contains("claim"));
      const auto contributions = (*reader)->contributions(runId, 1);
      QVERIFY(contributions.ok());
      int rejected = 0;
      for (const auto& c : *contributions) rejected += c.verdict == "rejected" ? 1 : 0;
      QCOMPARE(rejected, 3);
    }
  }
};

QTEST_GUILESS_MAIN(SwarmPoison)
#include "tst_swarm_poison.moc"
