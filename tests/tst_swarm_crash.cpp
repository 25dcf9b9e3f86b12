// Issue 5, acceptance 4: crash safety. A peer is killed with SIGKILL at 10 random moments (with
// 3-step rounds, many land while the round's state or the ledger is being written) and
// restarted each time. It must resume from its last complete round, lose at most the round in
// progress, keep an intact ledger whose committed rounds are contiguous, never load a partial
// state folder, and fall back to the round before a damaged newest one (issue 14, item 4).
#include "core/store/ledger.h"
#include "support/client_process.h"
#include "support/swarm_clients.h"

#include <QDirIterator>
#include <QElapsedTimer>
#include <QRandomGenerator>
#include <QTemporaryDir>

using namespace es::test;

class SwarmCrash : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  QStringList args(int rounds) const {
    // The bundled run with lighter steps (swarm_clients.h): recovery is what is under test.
    return {"--no-gui",
            "--run",
            es::test::customRun(dir_.filePath("run"), {}),
            "--data-dir",
            dir_.filePath("peer"),
            "--listen",
            "127.0.0.1:0",
            "--sync-every",
            "3",
            "--rounds",
            QString::number(rounds),
            "--threads",
            "1",
            "--events"};
  }
  QString stateDir() const { return es::test::runFolder(dir_.filePath("peer")) + "/swarm-state"; }

  // The round of the newest complete state folder (round-NNNNNNNN), or 0 (none yet).
  int stateRound() const {
    int newest = 0;
    for (const auto& name : QDir(stateDir()).entryList(QDir::Dirs | QDir::NoDotAndDotDot))
      if (name.startsWith("round-") && !name.endsWith(".partial")) newest = std::max(newest, name.mid(6).toInt());
    return newest;
  }
  // The round a client said it resumed after (its resumed event), or -1 (none yet).
  static int resumedFrom(const es::test::SwarmClient& client) {
    const auto resumed = client.events("resumed");
    return resumed.empty() ? -1 : resumed.front().value("round").toInt();
  }

 private Q_SLOTS:
  void survivesTenKillsAtRandomMoments() {
    const quint32 seed = QRandomGenerator::global()->generate();
    qInfo("seed %u", seed);
    QRandomGenerator rng(seed);
    std::string runId;
    int lastCommitted = 0, resumes = 0;
    qint64 roundMs = 0;  // how long the first round took from the claim to its saved state
    for (int kill = 0; kill < 10; ++kill) {
      const int before = stateRound();
      SwarmClient peer(QString("run%1").arg(kill), args(100000));
      // Wait until it trains again: with a saved state, until it says it resumed from exactly the
      // newest complete one (its resumed event); else until it claimed; then kill it at a random
      // moment of training, merging or saving.
      const auto ready = [&] { return before > 0 ? resumedFrom(peer) == before : !peer.events("claims").empty(); };
      QVERIFY2(waitUntil([&] { return ready() || !peer.running(); }, 180000), before > 0 ? "no resume" : "no claims");
      QVERIFY2(peer.running() && ready(), qPrintable(peer.log().join('\n')));
      if (before > 0) ++resumes;
      // A start with nothing saved yet runs until its first round is durable, so the next start
      // has something to resume: a round of 3 steps took 10.5 s on the loaded CI machine, and the
      // clean CI run of 1b78f73 killed all 10 starts (1–8 s in) before any round completed.
      // The kill then lands anywhere within about two rounds (training, merging or saving), as
      // long as a round takes on this machine.
      if (before == 0) {
        QElapsedTimer firstRound;
        firstRound.start();
        QVERIFY2(waitUntil([&] { return stateRound() > 0 || !peer.running(); }, 180000), "no round was saved in 180 s");
        roundMs = std::max<qint64>(roundMs, firstRound.elapsed());
      }
      QTest::qWait(int(1000 + rng.bounded(quint32(std::max<qint64>(7000, 2 * roundMs)))));
      QVERIFY2(peer.running(), qPrintable(peer.log().join('\n')));
      peer.kill();
      if (runId.empty()) runId = peer.runId().toStdString();
      auto reader = es::store::LedgerReader::open(dir_.filePath("peer/expertswarm.db").toStdString());
      QVERIFY2(reader.ok(), reader.ok() ? "" : reader.error().c_str());
      QCOMPARE((*reader)->integrityCheck(), std::string("ok"));
      const auto rounds = (*reader)->rounds(runId);
      QVERIFY(rounds.ok());
      for (std::size_t i = 0; i < rounds->size(); ++i) QCOMPARE((*rounds)[i].round, std::int64_t(i + 1));  // contiguous
      const int committed = int(rounds->size());
      // The state folder is durable before the round is committed: never behind the ledger.
      QVERIFY2(stateRound() >= committed, qPrintable(QString("state %1 < ledger %2").arg(stateRound()).arg(committed)));
      QVERIFY(committed >= lastCommitted);
      lastCommitted = committed;
      qInfo("kill %d: ledger has rounds 1..%d, newest state round %d", kill + 1, committed, stateRound());
    }
    qInfo("%d of 10 starts resumed from a saved round; the first round took %lld ms", resumes, roundMs);
    QCOMPARE(resumes, 9);  // every start after the first had a complete round to resume

    // A partial folder from a crash is never loaded, even when it looks newer.
    QDir().mkpath(stateDir() + "/round-99999999.partial");
    QFile junk(stateDir() + "/round-99999999.partial/base.safetensors");
    QVERIFY(junk.open(QIODevice::WriteOnly));
    junk.write("not a safetensors file");
    junk.close();
    const int before = stateRound();
    SwarmClient last("final", args(before + 2));
    QVERIFY(waitUntil([&] { return !last.running(); }, 300000));
    QVERIFY2(last.finishedWith(0), qPrintable(last.log().join('\n')));
    QCOMPARE(resumedFrom(last), before);
    QCOMPARE(int(last.rounds().size()), 2);
    QVERIFY(last.rounds().count(before + 2));

    // A damaged newest round (a torn file the file system did not protect): the client says so
    // and resumes from the round before it, which is kept for this (core/checkpoint/round_dirs.h).
    const int newest = stateRound();
    QCOMPARE(newest, before + 2);
    QFile torn(stateDir() + QString("/round-%1/training-state.safetensors").arg(newest, 8, 10, QChar('0')));
    QVERIFY(torn.exists() && torn.resize(torn.size() / 2));
    SwarmClient fallback("fallback", args(newest + 1));
    QVERIFY(waitUntil([&] { return !fallback.running(); }, 300000));
    QVERIFY2(fallback.finishedWith(0), qPrintable(fallback.log().join('\n')));
    QCOMPARE(resumedFrom(fallback), newest - 1);
    QVERIFY2(fallback.events("resumed").front().contains("note"), "the damaged round was passed over silently");
    qInfo() << "fallback:" << fallback.events("resumed").front().value("note").toString();
    QVERIFY(fallback.rounds().count(newest + 1));
  }
};

QTEST_GUILESS_MAIN(SwarmCrash)
#include "tst_swarm_crash.moc"
