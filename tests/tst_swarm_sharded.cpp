// Issue 38 between real processes: three `expertswarm --no-gui` clients on 127.0.0.1 (real
// libtorrent sessions, v2 folder torrents) in a copy of the bundled run with int8 contributions
// that shards from 3 senders with merged work, one reducer a shard and one shard audited by each
// client a round (swarm.reduction). Round 1 is all-to-all (nobody's work is merged yet); rounds
// 2-4 are sharded — each client fetches of the others' folders only its shards' and its audit's
// files, publishes its merged shards and its index, fetches the rest, and finds the audited
// shard's reducer honest — and after every round the three hold one state with every
// contribution merged.
#include "support/swarm_clients.h"

#include <QTemporaryDir>

#include <set>

using namespace es::test;

class SwarmSharded : public QObject {
  Q_OBJECT

  static constexpr int kPeers = 3;
  static constexpr int kRounds = 4;
  QTemporaryDir dir_;

  QStringList args(int i, const QString& run, const QString& listen, const QString& bootstrap) const {
    QStringList a{"--no-gui",
                  "--run",
                  run,
                  "--data-dir",
                  dir_.filePath(QString("peer%1").arg(i)),
                  "--listen",
                  listen,
                  "--sync-every",
                  "5",
                  "--rounds",
                  QString::number(kRounds),
                  "--threads",
                  "1",
                  "--events"};
    if (!bootstrap.isEmpty()) a << "--bootstrap" << bootstrap;
    return a;
  }

 private Q_SLOTS:
  void threeClientsMergeShardedRoundsIntoOneState() {
    const QString run = customRun(
        dir_.filePath("run"),
        {{"compression", "int8"}, {"reduction", QJsonObject{{"replicas", 1}, {"audits", 1}, {"shard_from", 3}}}});
    QVERIFY(!run.isEmpty());
    const int port = freeLoopbackPort();
    QVERIFY(port > 0);
    const QString bootstrap = QString("127.0.0.1:%1").arg(port);
    std::vector<std::unique_ptr<SwarmClient>> peers;
    for (int i = 0; i < kPeers; ++i)
      peers.push_back(std::make_unique<SwarmClient>(
          QString("peer%1").arg(i), args(i, run, i == 0 ? bootstrap : "127.0.0.1:0", i == 0 ? QString() : bootstrap)));
    const bool done = waitUntil(
        [&] {
          for (auto& p : peers)
            if (p->running()) return false;
          return true;
        },
        400000);
    for (auto& p : peers) qInfo().noquote() << p->name() << p->log().join("\n  ");
    QVERIFY2(done, "the peers did not finish 4 rounds in 400 s");
    for (auto& p : peers) {
      QVERIFY2(p->finishedWith(0), qPrintable(p->name()));
      QCOMPARE(int(p->rounds().size()), kRounds);
      QVERIFY2(p->events("recompute").empty(), qPrintable(p->name() + " recomputed a shard"));
      QVERIFY2(p->events("outputLiar").empty(), qPrintable(p->name() + " found an honest reducer lying"));
      std::set<int> sharded;
      for (const auto& e : p->events("sharded")) {
        sharded.insert(e.value("round").toInt());
        QCOMPARE(e.value("contributions").toInt(), kPeers);
        QVERIFY(e.value("reducing").toInt() < e.value("shards").toInt());
      }
      QCOMPARE(sharded, (std::set<int>{2, 3, 4}));
    }
    for (int r = 1; r <= kRounds; ++r) {
      const auto& first = peers[0]->rounds().at(r);
      for (auto& p : peers) {
        QCOMPARE(p->rounds().at(r).merged, first.merged);
        QCOMPARE(p->rounds().at(r).peers, kPeers);
      }
    }
  }
};

QTEST_GUILESS_MAIN(SwarmSharded)
#include "tst_swarm_sharded.moc"
