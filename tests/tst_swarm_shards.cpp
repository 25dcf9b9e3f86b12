// Issue 40, item 2: peers of a created run fetch only their shards and move on through the corpus.
// A host serves a run of 35 small shards (create-run, tiny preset, 1024 tokens a shard); four
// joiners come by magnet link with a budget of 4 shards each. Each fetches 4 shards, then at every
// epoch (one pass over its 4 shards' tokens) fetches the next window of its own order of the
// shards and deletes the old one (app/shard_rotation.h): at no move does its folder hold more than
// its 4, and over the run each joiner has trained on every shard of the corpus; restarted by the
// same magnet link, a joiner keeps the window it holds. Real client processes on loopback, real
// libtorrent transfers and file priorities.
#include "support/swarm_clients.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>

#include <set>

using namespace es::test;

class SwarmShards : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  QStringList args(const QString& name, const QString& listen) const {
    return {"--no-gui", "--data-dir", dir_.filePath(name), "--listen", listen, "--threads", "1", "--events"};
  }

  // The shards a joiner trained on: its first fetch and every window it moved to.
  static std::set<int> trainedOn(const SwarmClient& c, const QString& fetched, int* worst) {
    std::set<int> out;
    for (const auto& e : c.events("shards")) {
      for (const auto& v : e.value("held").toArray()) out.insert(v.toInt());
      *worst = std::max(*worst, int(e.value("on_disk").toArray().size()));
    }
    for (const auto& f : QDir(fetched + "/data").entryList({"train-*.bin"}, QDir::Files))
      out.insert(f.mid(6, 3).toInt());
    return out;
  }

 private Q_SLOTS:
  void joinersFetchTheirShardsAndCoverTheCorpus() {
    QVERIFY(QDir().mkpath(dir_.filePath("texts")));
    QFile in(ES_SHARE_DIR "/runs/sotu-text/corpus/sotu-train.txt"), out(dir_.filePath("texts/speeches.txt"));
    QVERIFY(in.open(QIODevice::ReadOnly) && out.open(QIODevice::WriteOnly));
    out.write(in.read(115000));  // 35 shards
    out.close();
    const QString runDir = dir_.filePath("shards-run");
    QProcess create;
    create.start(ES_CLIENT_BINARY, {"create-run", "--out", runDir, "--preset", "tiny", "--shard-tokens", "1024",
                                    "--sync-every", "8", dir_.filePath("texts")});
    QVERIFY(create.waitForFinished(120000) && create.exitCode() == 0);
    const auto link =
        QRegularExpression("magnet:\\?xt=urn:btmh:1220[0-9a-f]{64}").match(create.readAllStandardOutput());
    QVERIFY(link.hasMatch());
    const int shards = QDir(runDir + "/data").entryList({"train-*.bin"}, QDir::Files).size();
    QVERIFY2(shards >= 32, qPrintable(QString::number(shards)));

    const int port = freeLoopbackPort();
    QVERIFY(port > 0);
    const QString first = QString("127.0.0.1:%1").arg(port);
    SwarmClient host("host", args("host", first) << "--run" << runDir);
    QVERIFY2(waitUntil([&] { return !host.runId().isEmpty() || !host.running(); }, 120000), "the host did not start");
    std::vector<std::unique_ptr<SwarmClient>> joiners;
    for (int j = 0; j < 4; ++j) {
      const QString name = QString("joiner-%1").arg(j);
      // 4 shards of 1024 tokens: 4 × 2064 bytes = 8256 ≤ 0.0079 MiB (8283 bytes) < 5 shards.
      joiners.push_back(std::make_unique<SwarmClient>(name, args(name, "127.0.0.1:0")
                                                                << "--run" << link.captured(0) << "--bootstrap" << first
                                                                << "--data-budget-mib"
                                                                << "0.0079"));
    }
    auto folderOf = [&](int j) {
      return dir_.filePath(QString("joiner-%1/joined/%2/shards-run").arg(j).arg(host.runId().left(16)));
    };
    auto covered = [&] {
      for (int j = 0; j < 4; ++j) {
        int worst = 0;
        if (int(trainedOn(*joiners[std::size_t(j)], folderOf(j), &worst).size()) < shards) return false;
      }
      return true;
    };
    // 56-121 s here (2 cores; the README run's 121 s beside other tests): room for a slower CI
    // machine inside CTest's 600 s.
    const bool done = waitUntil([&] { return covered() || !host.running(); }, 450000);
    for (auto& j : joiners)
      qInfo().noquote() << j->name() << ":" << j->events("shards").size() << "moves;"
                        << j->log().filter("Epoch").join("\n  ");
    if (!done) {  // the whole timeline: where the swarm stopped (a round, a transfer, a move)
      qInfo().noquote() << host.name() << "\n  " << host.timedLog().join("\n  ");
      for (auto& j : joiners) qInfo().noquote() << j->name() << "\n  " << j->timedLog().join("\n  ");
    }
    QVERIFY2(host.running(), qPrintable(host.log().join("\n  ")));
    QVERIFY2(done, "a joiner did not get through every shard within 450 s");
    for (int j = 0; j < 4; ++j) {
      const auto& c = *joiners[std::size_t(j)];
      QVERIFY2(c.logContains(QString("Fetching 4 of the run's %1 training shards").arg(shards)), qPrintable(c.name()));
      int worst = 0;
      trainedOn(c, folderOf(j), &worst);
      QVERIFY2(worst <= 4 && worst >= 1, qPrintable(c.name() + ": " + QString::number(worst) + " shards on disk"));
      // It moved on, window by window: 35 shards in windows of 4 take 9 windows, the first fetched
      // at join and the last perhaps still arriving when coverage is seen (its files are on disk,
      // its "shards" note comes once they are all here): at least 7 moves noted.
      QVERIFY2(c.events("shards").size() + 1 >= std::size_t(shards / 4),
               qPrintable(c.name() + ": " + QString::number(c.events("shards").size()) + " moves"));
      for (const auto& e : c.events("shards")) QCOMPARE(e.value("held").toArray().size(), 4);
    }

    // A restart by the same magnet link keeps the window it holds (the rotation moves on from
    // there) instead of fetching epoch 0's again first.
    joiners[0]->terminate();
    QVERIFY(waitUntil([&] { return !joiners[0]->running(); }, 60000));
    const int heldAtStop = QDir(folderOf(0) + "/data").entryList({"train-*.bin"}, QDir::Files).size();
    QVERIFY(heldAtStop >= 1);
    SwarmClient again("joiner-0-again", args("joiner-0", "127.0.0.1:0") << "--run" << link.captured(0) << "--bootstrap"
                                                                        << first << "--data-budget-mib"
                                                                        << "0.0079");
    const QString kept = QString("Keeping the %1 of the run's %2 training shards it holds").arg(heldAtStop).arg(shards);
    QVERIFY2(waitUntil([&] { return !again.runId().isEmpty() || !again.running(); }, 120000),
             qPrintable(again.log().join("\n  ")));
    QVERIFY2(again.logContains(kept), qPrintable(again.log().join("\n  ")));
    QVERIFY(!again.logContains("Fetching 4 of the run's"));
  }
};

QTEST_GUILESS_MAIN(SwarmShards)
#include "tst_swarm_shards.moc"
