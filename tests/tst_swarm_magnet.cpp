// Joining a run by its magnet link (`--run MAGNET`; docs/ARCHITECTURE.md, "Joining by magnet
// link"): a peer that knows only the
// run's link and one DHT node fetches the run's manifest from the run's peers, prepares it with the
// bundled corpus, and trains with them — the same merged state every round. While it still waits
// for the manifest, SIGTERM stops it cleanly.
#include "support/swarm_clients.h"

#include <QTemporaryDir>

using namespace es::test;

class SwarmMagnet : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  QStringList args(const QString& name, const QString& listen) const {
    return {
        "--no-gui", "--data-dir", dir_.filePath(name), "--listen", listen,    "--sync-every", "5", "--eval-every", "5",
        "--rounds", "2",          "--threads",         "1",        "--events"};
  }

 private Q_SLOTS:
  void peerJoinsByMagnetLinkAndTrainsWithTheRun() {
    const int port = freeLoopbackPort();
    QVERIFY(port > 0);
    const QString first = QString("127.0.0.1:%1").arg(port);
    SwarmClient a("a", args("a", first));
    // The link others join by: the run id (started event) as a BEP 9 v2 magnet link.
    QVERIFY2(waitUntil([&] { return !a.runId().isEmpty() || !a.running(); }, 120000), "the first peer did not start");
    QVERIFY2(a.runId().size() == 64, qPrintable(a.log().join('\n')));
    QVERIFY2(a.logContains("magnet:?xt=urn:btmh:1220" + a.runId()), "the first peer printed no magnet link for others");
    const QString link = "magnet:?xt=urn:btmh:1220" + a.runId();
    SwarmClient b("b", args("b", "127.0.0.1:0") << "--run" << link << "--bootstrap" << first);
    const bool done = waitUntil([&] { return !a.running() && !b.running(); }, 400000);
    qInfo().noquote() << "a:" << a.log().join("\n  ");
    qInfo().noquote() << "b:" << b.log().join("\n  ");
    QVERIFY2(done, "the peers did not finish 2 rounds");
    QVERIFY(a.finishedWith(0));
    QVERIFY(b.finishedWith(0));
    const auto manifest = b.events("manifest");
    QCOMPARE(int(manifest.size()), 2);
    QCOMPARE(manifest[0].value("state").toString(), QString("fetching"));
    QCOMPARE(manifest[1].value("state").toString(), QString("fetched"));
    QCOMPARE(manifest[1].value("run").toString(), a.runId());
    QCOMPARE(b.runId(), a.runId());  // it trains the run the link names
    QCOMPARE(int(b.rounds().size()), 2);
    // Together from the start: the newcomer's claims, contributions and merges match the first's.
    for (int r = 1; r <= 2; ++r) {
      QCOMPARE(b.rounds().at(r).peers, 2);
      QCOMPARE(b.rounds().at(r).merged, a.rounds().at(r).merged);
    }
  }

  void stopsCleanlyWhileFetchingTheManifest() {
    // Nobody serves this run; with no DHT node to ask the fetch can never start.
    const QString link = "magnet:?xt=urn:btmh:1220" + QString(64, 'e');
    SwarmClient c("c", args("c", "127.0.0.1:0") << "--run" << link);
    QVERIFY(waitUntil([&] { return !c.events("manifest").empty(); }, 60000));
    QCOMPARE(c.events("manifest").front().value("state").toString(), QString("fetching"));
    c.terminate();  // the user gives up before the 180 s deadline: a clean stop all the same
    QVERIFY2(waitUntil([&] { return !c.running(); }, 60000), "no exit after SIGTERM while fetching");
    qInfo().noquote() << c.log().join("\n  ");
    QVERIFY(c.finishedWith(0));
  }
};

QTEST_GUILESS_MAIN(SwarmMagnet)
#include "tst_swarm_magnet.moc"
