// SwarmSession in one process: bad settings and bad calls are clear errors, and shutdown is fast.
#include "p2p/identity.h"
#include "p2p/swarm_session.h"
#include "p2p/torrent_maker.h"

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>

#include <optional>

using namespace es::p2p;

class SwarmSessionTest : public QObject {
  Q_OBJECT

  // `mib` MiB of bytes that differ from piece to piece (a pattern, not zeros: the hash must work).
  static void writeFile(const QString& path, int mib) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    QByteArray block(1 << 20, Qt::Uninitialized);
    for (int m = 0; m < mib; ++m) {
      for (int i = 0; i < block.size(); ++i) block[i] = char((i * 31 + m * 7) ^ (i >> 11));
      QCOMPARE(f.write(block), qint64(block.size()));
    }
  }

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

  // Issue 13 item 6: the engine thread keeps running its event loop (alerts, gossip, timers)
  // while a file it publishes is hashed; the result comes back on that thread, never from inside
  // the call, and is the same torrent the synchronous path makes.
  void publishingHashesOffTheCallersThread() {
    QTemporaryDir dir;
    const auto path = dir.filePath("snapshot.safetensors");
    writeFile(path, 128);
    const auto expected = makeTorrent(path.toStdString());
    QVERIFY(expected.ok());
    auto created = SwarmSession::create(loopback(), Identity::generate());
    QVERIFY(created.ok());
    int ticks = 0;
    qint64 longestGapMs = 0;
    QElapsedTimer sinceTick;
    QTimer ticker;
    QObject::connect(&ticker, &QTimer::timeout, [&] {
      longestGapMs = std::max(longestGapMs, sinceTick.restart());
      ++ticks;
    });
    std::optional<es::Expected<std::string>> result;
    QElapsedTimer clock;
    clock.start();
    sinceTick.start();
    ticker.start(5);
    (*created)->publishFileAsync(path.toStdString(), [&](es::Expected<std::string> id) { result = std::move(id); });
    QVERIFY(!result);  // not from inside the call
    QTRY_VERIFY_WITH_TIMEOUT(result.has_value(), 60000);
    const int ticksWhileHashing = ticks;
    qInfo("128 MiB hashed and seeded in %lld ms; the caller's event loop ran %d times meanwhile (longest gap %lld ms)",
          clock.elapsed(), ticksWhileHashing, longestGapMs);
    QVERIFY2(result->ok(), result->ok() ? "" : result->error().c_str());
    QCOMPARE(**result, expected->infoHashV2);
    QVERIFY2(ticksWhileHashing > 0, "the caller's thread was blocked for the whole hashing");
    QCOMPARE(int((*created)->transfers().size()), 1);

    // A missing file: a clear error, also delivered later.
    result.reset();
    (*created)->publishFileAsync(dir.filePath("missing.bin").toStdString(),
                                 [&](es::Expected<std::string> id) { result = std::move(id); });
    QVERIFY(!result);
    QTRY_VERIFY_WITH_TIMEOUT(result.has_value(), 10000);
    QVERIFY(!result->ok());
    QVERIFY(result->error().find("missing.bin") != std::string::npos);

    // Torn down while hashing: the session waits for the hash, and the callback never runs on a
    // dead session.
    bool called = false;
    writeFile(dir.filePath("other.safetensors"), 64);
    (*created)->publishFileAsync(dir.filePath("other.safetensors").toStdString(),
                                 [&](es::Expected<std::string>) { called = true; });
    created->reset();
    QCoreApplication::processEvents();
    QVERIFY(!called);
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
