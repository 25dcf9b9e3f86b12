// SwarmSession in one process: bad settings and bad calls are clear errors, and shutdown is fast.
#include "p2p/identity.h"
#include "p2p/swarm_session.h"
#include "p2p/torrent_maker.h"

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>

using namespace es::p2p;

class SwarmSessionTest : public QObject {
  Q_OBJECT

  static SwarmSettings loopback() {
    SwarmSettings s;
    s.listen = "127.0.0.1:0";
    s.sameHostSwarm = true;
    s.useSameHostTiming();
    s.enableUtp = false;
    return s;
  }

 private Q_SLOTS:
  void refusesMalformedEndpoints() {
    const auto id = Identity::generate();
    for (const char* listen : {"127.0.0.1", "127.0.0.1:99999", ":80", "127.0.0.1:x"}) {
      auto s = loopback();
      s.listen = listen;
      const auto session = SwarmSession::create(s, id);
      QVERIFY2(!session.ok(), listen);
      QVERIFY(session.error().find(listen) != std::string::npos);
    }
    auto s = loopback();
    s.bootstrap = {"127.0.0.1:0"};
    QVERIFY(!SwarmSession::create(s, id).ok());
  }

  void listensOnARealPortAndShutsDownFast() {
    const auto id = Identity::generate();
    QElapsedTimer clock;
    clock.start();
    auto session = SwarmSession::create(loopback(), id);
    QVERIFY(session.ok());
    QVERIFY((*session)->listenPort() > 0);
    QCOMPARE((*session)->listenEndpoint(), "127.0.0.1:" + std::to_string((*session)->listenPort()));
    QElapsedTimer stop;
    stop.start();
    session->reset();
    qInfo("session start %lld ms, shutdown %lld ms", clock.elapsed() - stop.elapsed(), stop.elapsed());
    QVERIFY(stop.elapsed() < 2000);
  }

  // The donor's bandwidth caps (GUI settings) change the running session's limits at once.
  void rateLimitsApplyToTheRunningSession() {
    const auto id = Identity::generate();
    auto settings = loopback();
    settings.uploadRateLimit = 50000;
    auto session = SwarmSession::create(settings, id);
    QVERIFY(session.ok());
    QCOMPARE((*session)->rateLimits(), (std::pair<int, int>{50000, 0}));
    (*session)->setRateLimits(256 * 1024, 64 * 1024);
    QCOMPARE((*session)->rateLimits(), (std::pair<int, int>{256 * 1024, 64 * 1024}));
    (*session)->setRateLimits(0, 0);  // unlimited again
    QCOMPARE((*session)->rateLimits(), (std::pair<int, int>{0, 0}));
  }

  void badCallsAreClearErrors() {
    QTemporaryDir dir;
    const auto id = Identity::generate();
    auto created = SwarmSession::create(loopback(), id);
    QVERIFY(created.ok());
    auto& swarm = **created;
    PeerRecord record;
    record.seq = 1;
    QVERIFY(!swarm.publishRecord(record).ok());  // not in a run yet
    QVERIFY(!swarm.joinRun(dir.filePath("missing.torrent").toStdString(), dir.path().toStdString(), {}).ok());
    QVERIFY(!swarm.fetch("not-a-hash", dir.path().toStdString()).ok());
    QVERIFY(!swarm.publishFile(dir.filePath("missing.bin").toStdString()).ok());

    QFile run(dir.filePath("run.json"));
    QVERIFY(run.open(QIODevice::WriteOnly));
    run.write("{\"name\": \"test\"}");
    run.close();
    const auto torrent = makeTorrent(run.fileName().toStdString());
    QVERIFY(torrent.ok());
    QFile file(dir.filePath("run.torrent"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(torrent->bytes.data(), qint64(torrent->bytes.size()));
    file.close();
    QVERIFY(swarm.joinRun(file.fileName().toStdString(), dir.path().toStdString(), {}).ok());
    QCOMPARE(swarm.runId(), torrent->infoHashV2);
    QVERIFY(!swarm.joinRun(file.fileName().toStdString(), dir.path().toStdString(), {}).ok());  // one run per session
    QVERIFY(swarm.publishRecord(record).ok());
    QCOMPARE(swarm.records().size(), std::size_t(1));
    QVERIFY(!swarm.publishRecord(record).ok());  // seq must grow
    record.seq = 2;
    record.claims = {3, 1};  // unsorted: refused by signRecord, nothing stored
    QVERIFY(!swarm.publishRecord(record).ok());
    QCOMPARE(swarm.records().find(id.publicKey())->seq, std::int64_t(1));
  }
};

QTEST_GUILESS_MAIN(SwarmSessionTest)
#include "tst_swarm_session.moc"
