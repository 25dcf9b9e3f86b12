// The command line: bad input is a clear message and exit code 2, nothing starts.
#include "support/client_process.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

using es::test::runClient;

namespace {

// A created run's folder, `dir`/my-run (tiny preset, the bundled corpus); "" when create-run failed.
QString createTinyRun(const QTemporaryDir& dir) {
  const QString run = dir.filePath("my-run");
  const auto created =
      runClient({"create-run", "--out", run, "--preset", "tiny", ES_SHARE_DIR "/runs/sotu-text/corpus"});
  if (created.exitCode != 0) qWarning().noquote() << created.err;
  return created.exitCode == 0 ? run : QString();
}
// Damage that keeps the size: two different bytes of the run's first shard swapped.
bool swapTwoBytesOfAShard(const QString& run) {
  QFile shard(run + "/data/train-000.bin");
  if (!shard.open(QIODevice::ReadWrite) || !shard.seek(1000)) return false;
  const QByteArray two = shard.read(2);
  if (two.size() != 2 || two[0] == two[1] || !shard.seek(1000)) return false;
  return shard.write(QByteArray().append(two[1]).append(two[0])) == 2;
}

}  // namespace

class CliTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void rejectsBadInputWithExitCodeTwo_data() {
    QTest::addColumn<QStringList>("arguments");
    QTest::addColumn<QString>("mentions");
    const QString base = QStringLiteral("--no-gui --local-only ");
    auto row = [&](const char* name, const QString& args, const char* mentions) {
      QTest::newRow(name) << args.split(QLatin1Char(' '), Qt::SkipEmptyParts) << QString::fromLatin1(mentions);
    };
    row("unknown flag", base + "--frobnicate", "frobnicate");
    row("steps not a number", base + "--steps abc", "--steps");
    row("steps zero", base + "--steps 0", "--steps");
    row("steps negative", base + "--steps -5", "--steps");
    row("experts garbage", base + "--experts 0,x", "--experts");
    row("experts duplicated", base + "--experts 1,1", "twice");
    row("threads zero", base + "--threads 0", "--threads");
    row("unknown device", base + "--device tpu", "--device");
    row("missing value", base + "--steps", "steps");
    row("stray argument", base + "banana", "banana");
    row("local-only is headless", "--local-only", "--no-gui");
    row("bad listen", "--no-gui --listen 127.0.0.1", "--listen");
    row("bad bootstrap port", "--no-gui --bootstrap 127.0.0.1:0", "--bootstrap");
    row("port mapping on loopback", "--no-gui --port-mapping --listen 127.0.0.1:6881", "--port-mapping");
    row("rounds zero", "--no-gui --rounds 0", "--rounds");
    row("host memory cap zero", "--no-gui --host-memory-mib 0", "--host-memory-mib");
    row("GPU memory cap garbage", "--no-gui --gpu-memory-mib 8G", "--gpu-memory-mib");
    row("swarm flag in local mode", base + "--rounds 3", "--rounds");
    row("experts are claimed in a swarm", "--no-gui --experts 1", "--experts");
    row("events are the headless swarm's", "--events", "--events");
    row("events in local mode", base + "--events", "--events");
    row("magnet without a v2 hash", "--no-gui --run magnet:?xt=urn:btih:0123456789abcdef0123456789abcdef01234567",
        "btmh");
    row("magnet with a short hash", "--no-gui --run magnet:?xt=urn:btmh:1220abcdef", "btmh");
    row("magnet in local mode", base + "--run magnet:?xt=urn:btmh:1220" + QString(64, 'a'), "--local-only");
  }

  void rejectsBadInputWithExitCodeTwo() {
    QFETCH(QStringList, arguments);
    QFETCH(QString, mentions);
    QTemporaryDir dataDir;
    const auto run = runClient(QStringList{QStringLiteral("--data-dir"), dataDir.path()} + arguments);
    QCOMPARE(run.exitCode, 2);
    QVERIFY2(run.err.contains(mentions), qPrintable(run.err));
    QVERIFY(run.out.isEmpty());
    QVERIFY2(QDir(dataDir.path()).isEmpty(), "bad input must not create anything");
  }

  // create-run (issue 40): bad input is exit 2 and a message naming it, nothing created.
  void createRunRejectsBadInputWithExitCodeTwo_data() {
    QTest::addColumn<QStringList>("arguments");
    QTest::addColumn<QString>("mentions");
    const QString corpus = QStringLiteral(ES_SHARE_DIR "/runs/sotu-text/corpus");
    QTest::newRow("no --out") << QStringList{corpus} << "--out DIR is required";
    QTest::newRow("no corpus") << QStringList{"--out", "@/run"} << "name the corpus";
    QTest::newRow("unknown preset") << QStringList{"--out", "@/run", "--preset", "huge", corpus} << "--preset";
    QTest::newRow("val fraction") << QStringList{"--out", "@/run", "--val-fraction", "0.7", corpus} << "--val-fraction";
    QTest::newRow("shard tokens") << QStringList{"--out", "@/run", "--shard-tokens", "5", corpus} << "--shard-tokens";
    QTest::newRow("unknown flag") << QStringList{"--out", "@/run", "--frobnicate", corpus} << "frobnicate";
    QTest::newRow("a folder name that is no run name")
        << QStringList{"--out", "@/my run", corpus} << "names the run torrent";
    QTest::newRow("a bad run name") << QStringList{"--out", "@/run", "--name", "../x", corpus} << "--name";
    QTest::newRow("a compressed corpus") << QStringList{"--out", "@/run", ES_TEST_SOURCE_DIR "/../resources/corpus"}
                                         << "is compressed";
  }
  void createRunRejectsBadInputWithExitCodeTwo() {
    QFETCH(QStringList, arguments);
    QFETCH(QString, mentions);
    QTemporaryDir dir;
    for (auto& a : arguments) a.replace(QLatin1Char('@'), dir.path());
    const auto run = runClient(QStringList{QStringLiteral("create-run")} + arguments);
    QVERIFY2(run.exitCode == 2, qPrintable(run.err));
    QVERIFY2(run.err.contains(mentions), qPrintable(run.err));
    QVERIFY2(QDir(dir.path()).isEmpty(), "bad input must not create anything");
  }

  // A created run whose shard changed on disk (same size, other bytes) is refused by its host,
  // naming the file — hashing the folder again would otherwise make it another run.
  void aCreatedRunWithADamagedShardIsRefused() {
    QTemporaryDir dir;
    const QString run = createTinyRun(dir);
    QVERIFY(!run.isEmpty());
    QVERIFY(swapTwoBytesOfAShard(run));
    const auto host =
        runClient({"--no-gui", "--local-only", "--run", run, "--data-dir", dir.filePath("data"), "--steps", "1"});
    QCOMPARE(host.exitCode, 1);
    QVERIFY2(
        host.err.contains("data/train-000.bin\" in") && host.err.contains("is not the file the run was created with"),
        qPrintable(host.err));
  }

  // A created run's folder is hashed against .run.torrent at its first start only: later starts
  // find every file's size and time as the stamp of that check left them and skip the hashing
  // (GiBs of shards cost seconds to minutes) — until a file is rewritten, when the full check runs
  // again and finds the damage.
  void aCreatedRunIsHashedOnceUntilAFileChanges() {
    QTemporaryDir dir;
    const QString run = createTinyRun(dir);
    QVERIFY(!run.isEmpty());
    const QStringList host{"--no-gui",   "--local-only",       "--run",   run,
                           "--data-dir", dir.filePath("data"), "--steps", "1"};
    const QString skipped = "not hashed again";
    const auto first = runClient(host);
    QVERIFY2(first.exitCode == 0 && !first.err.contains(skipped), qPrintable(first.err));
    const auto second = runClient(host);
    QVERIFY2(second.exitCode == 0 && second.err.contains(skipped), qPrintable(second.err));
    QVERIFY(swapTwoBytesOfAShard(run));
    const auto third = runClient(host);
    QCOMPARE(third.exitCode, 1);
    QVERIFY2(third.err.contains("is not the file the run was created with"), qPrintable(third.err));
  }

  void rejectsAnExpertTheRunDoesNotHave() {
    QTemporaryDir dataDir;
    const auto run = runClient({QStringLiteral("--no-gui"), QStringLiteral("--local-only"), QStringLiteral("--experts"),
                                QStringLiteral("0,8"), QStringLiteral("--data-dir"), dataDir.path()});
    QCOMPARE(run.exitCode, 2);
    QVERIFY2(run.err.contains(QStringLiteral("expert 8 does not exist")), qPrintable(run.err));
  }

  void rejectsAGpuThisBuildCannotUse() {
    QTemporaryDir dataDir;
    const auto run = runClient({QStringLiteral("--no-gui"), QStringLiteral("--local-only"), QStringLiteral("--device"),
                                QStringLiteral("cuda:7"), QStringLiteral("--data-dir"), dataDir.path()});
    QCOMPARE(run.exitCode, 2);  // no CUDA here, or fewer than 8 GPUs
    QVERIFY2(run.err.contains(QStringLiteral("--device")), qPrintable(run.err));
    QVERIFY(QDir(dataDir.path()).isEmpty());
  }

  // A stranger's manifest (--run <folder>, as a joined run is started) that names a path for its
  // run or a corpus file outside its folder: exit 2 naming the field, nothing in the data dir.
  void rejectsAManifestThatReachesOutsideItsRun_data() {
    QTest::addColumn<QString>("key");
    QTest::addColumn<QJsonValue>("value");
    QTest::addColumn<QString>("mentions");
    QTest::newRow("name climbs out") << "name" << QJsonValue("../../escape") << "name";
    QTest::newRow("absolute corpus") << "train_corpus" << QJsonValue(QJsonArray{"/etc/passwd"}) << "data.train_corpus";
    QTest::newRow("corpus via a link") << "train_corpus" << QJsonValue(QJsonArray{"out/passwd"})
                                       << "data.train_corpus[0]";
  }
  void rejectsAManifestThatReachesOutsideItsRun() {
    QFETCH(QString, key);
    QFETCH(QJsonValue, value);
    QFETCH(QString, mentions);
    QTemporaryDir dataDir, runDir;
    QFile source(QStringLiteral(ES_SHARE_DIR "/runs/sotu-text/run.json"));
    QVERIFY(source.open(QIODevice::ReadOnly));
    auto manifest = QJsonDocument::fromJson(source.readAll()).object();
    if (key == "name") {
      manifest.insert(key, value);
    } else {
      auto data = manifest.value("data").toObject();
      data.insert(key, value);
      manifest.insert("data", data);
    }
    QFile out(runDir.filePath("run.json"));
    QVERIFY(out.open(QIODevice::WriteOnly));
    out.write(QJsonDocument(manifest).toJson());
    out.close();
    QVERIFY(QFile::link(QStringLiteral("/etc"), runDir.filePath("out")));
    QVERIFY(QFile::link(QStringLiteral(ES_SHARE_DIR "/runs/sotu-text/corpus"), runDir.filePath("corpus")));
    const auto run = runClient({QStringLiteral("--no-gui"), QStringLiteral("--local-only"), QStringLiteral("--run"),
                                runDir.path(), QStringLiteral("--data-dir"), dataDir.path()});
    QCOMPARE(run.exitCode, 2);
    QVERIFY2(run.err.contains(mentions), qPrintable(run.err));
    QVERIFY2(QDir(dataDir.path()).isEmpty(), "a refused manifest must not create anything");
  }

  // Without --no-gui the window needs a display; without one the client says what to do.
  void windowWithoutADisplayIsAClearError() {
    QTemporaryDir dataDir;
    auto env = QProcessEnvironment::systemEnvironment();
    for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}) env.remove(name);
    const auto run = runClient({QStringLiteral("--data-dir"), dataDir.path()}, 60000, env);
    QCOMPARE(run.exitCode, 2);
    QVERIFY2(run.err.contains(QStringLiteral("no display")) && run.err.contains(QStringLiteral("--no-gui")),
             qPrintable(run.err));
    QVERIFY(QDir(dataDir.path()).isEmpty());
    // --help never needs one.
    QCOMPARE(runClient({QStringLiteral("--help")}, 60000, env).exitCode, 0);
  }

  void helpAndVersionExitZero() {
    const auto help = runClient({QStringLiteral("--help")});
    QCOMPARE(help.exitCode, 0);
    for (const char* flag : {"--no-gui", "--local-only", "--steps", "--experts", "--data-dir"})
      QVERIFY2(help.out.contains(QLatin1String(flag)), flag);
    const auto version = runClient({QStringLiteral("--version")});
    QCOMPARE(version.exitCode, 0);
    QVERIFY(version.out.startsWith(QStringLiteral("expertswarm ")));
  }
};

QTEST_GUILESS_MAIN(CliTest)
#include "tst_cli.moc"
