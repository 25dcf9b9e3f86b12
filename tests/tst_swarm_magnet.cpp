// Joining a run by its magnet link (`--run MAGNET`; docs/ARCHITECTURE.md, "Joining by magnet
// link"): a peer that knows only the
// run's link and one DHT node fetches the run's manifest from the run's peers, prepares it with the
// bundled corpus, and trains with them — the same merged state every round; a link to the run
// installed with the client fetches nothing. While it still waits
// for the manifest, SIGTERM stops it cleanly. A run torrent that is not one small plain run.json
// (no attributes: executable, hidden, symlink) is refused from its metadata alone, and leaves
// nothing behind (issue 37 item 6) — unless it is a prepared run's folder (create-run, issue 40),
// which a joiner fetches whole and trains on.
#include "p2p/torrent_maker.h"
#include "support/swarm_clients.h"
#include "support/swarm_probes.h"

#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>

#include <libtorrent/create_torrent.hpp>
#include <libtorrent/torrent_info.hpp>

#include <iterator>
#include <sstream>

using namespace es::test;

class SwarmMagnet : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  QStringList args(const QString& name, const QString& listen) const {
    return {
        "--no-gui", "--data-dir", dir_.filePath(name), "--listen", listen,    "--sync-every", "5", "--eval-every", "5",
        "--rounds", "2",          "--threads",         "1",        "--events"};
  }

  // The content a hostile run torrent is made of, under `seedDir`/content (its run folder): the
  // path of the file or folder to make the torrent of.
  static QString makeBadRun(const QString& seedDir, const QString& layout) {
    const QString manifest = QStringLiteral(ES_SHARE_DIR "/runs/sotu-text/run.json");
    const QString content = seedDir + "/content";
    if (!QDir().mkpath(content + "/run")) return {};
    if (layout == "two") {
      QFile extra(content + "/run/extra.bin");
      const bool ok = QFile::copy(manifest, content + "/run/run.json") && extra.open(QIODevice::WriteOnly) &&
                      extra.write(QByteArray(1000, 'x')) == 1000;
      return ok ? content + "/run" : QString();
    }
    if (layout == "gap") {  // a prepared run's files, but its shards skip a number
      const QStringList files{"run/run.json", "run/tokenizer.json", "run/data/val.bin", "run/data/train-000.bin",
                              "run/data/train-002.bin"};
      bool ok = QDir().mkpath(content + "/run/data");
      for (const auto& f : files) {
        QFile out(content + "/" + f);
        ok = ok && out.open(QIODevice::WriteOnly) && out.write(QByteArray(1040, 'x')) == 1040;
      }
      return ok ? content + "/run" : QString();
    }
    if (layout == "name") return QFile::copy(manifest, content + "/manifest.json") ? content + "/manifest.json" : "";
    if (layout == "exec") {
      const bool ok =
          QFile::copy(manifest, content + "/run.json") &&
          QFile::setPermissions(content + "/run.json", QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
      return ok ? content + "/run.json" : QString();
    }
    QFile in(manifest), out(content + "/run.json");
    if (!in.open(QIODevice::ReadOnly) || !out.open(QIODevice::WriteOnly)) return {};
    QByteArray bytes = in.readAll();
    bytes.append(QByteArray(1024 * 1024 - bytes.size(), ' '));
    return out.write(bytes) == bytes.size() ? content + "/run.json" : QString();
  }

  // The host `a` and the joiner `b` finish their 2 rounds, b on the run the link names: every
  // round b merges the state a merged, and from round 2 on with both contributions. Round 1 may
  // be a's alone on both: b arrives after a's join window (it fetches first), and a, training
  // alone on every expert, may close round 1 before b's contribution exists; b then merges a's
  // set, as any latecomer does.
  static void trainedTogether(SwarmClient& a, SwarmClient& b) {
    const bool done = waitUntil([&] { return !a.running() && !b.running(); }, 400000);
    qInfo().noquote() << "a:" << a.log().join("\n  ");
    qInfo().noquote() << "b:" << b.log().join("\n  ");
    QVERIFY2(done, "the peers did not finish 2 rounds");
    QVERIFY(a.finishedWith(0));
    QVERIFY(b.finishedWith(0));
    QCOMPARE(b.runId(), a.runId());
    QCOMPARE(int(b.rounds().size()), 2);
    QCOMPARE(b.rounds().at(1).peers, a.rounds().at(1).peers);
    QCOMPARE(b.rounds().at(2).peers, 2);
    for (int r = 1; r <= 2; ++r) QCOMPARE(b.rounds().at(r).merged, a.rounds().at(r).merged);
  }

 private Q_SLOTS:
  // A run of a text corpus (the bundled text run: its run torrent is run.json alone): the joiner
  // fetches run.json, finds the corpus it names bundled, and trains with the host.
  void peerJoinsByMagnetLinkAndTrainsWithTheRun() {
    const int port = freeLoopbackPort();
    QVERIFY(port > 0);
    const QString first = QString("127.0.0.1:%1").arg(port);
    SwarmClient a("a", args("a", first) << "--run" << ES_SHARE_DIR "/runs/sotu-text");
    // The link others join by: the run id (started event) as a BEP 9 v2 magnet link.
    QVERIFY2(waitUntil([&] { return !a.runId().isEmpty() || !a.running(); }, 120000), "the first peer did not start");
    QVERIFY2(a.runId().size() == 64, qPrintable(a.log().join('\n')));
    QVERIFY2(a.logContains("magnet:?xt=urn:btmh:1220" + a.runId()), "the first peer printed no magnet link for others");
    const QString link = "magnet:?xt=urn:btmh:1220" + a.runId();
    SwarmClient b("b", args("b", "127.0.0.1:0") << "--run" << link << "--bootstrap" << first);
    trainedTogether(a, b);
    if (QTest::currentTestFailed()) return;
    const auto manifest = b.events("manifest");
    QCOMPARE(int(manifest.size()), 2);
    QCOMPARE(manifest[0].value("state").toString(), QString("fetching"));
    QCOMPARE(manifest[1].value("state").toString(), QString("fetched"));
    QCOMPARE(manifest[1].value("run").toString(), a.runId());
  }

  // The link of the run installed with the client (the bundled default run, a created run) is
  // joined from the installed folder: nothing fetched, no joined/ folder, the id the host
  // computed by hashing that folder.
  void aLinkToTheInstalledRunFetchesNothing() {
    const int port = freeLoopbackPort();
    QVERIFY(port > 0);
    const QString first = QString("127.0.0.1:%1").arg(port);
    SwarmClient a("installed-a", args("installed-a", first));
    QVERIFY2(waitUntil([&] { return !a.runId().isEmpty() || !a.running(); }, 120000), "the host did not start");
    const QString link = "magnet:?xt=urn:btmh:1220" + a.runId();
    SwarmClient b("installed-b", args("installed-b", "127.0.0.1:0") << "--run" << link << "--bootstrap" << first);
    const bool started = waitUntil([&] { return !b.runId().isEmpty() || !b.running(); }, 120000);
    qInfo().noquote() << "b:" << b.log().join("\n  ");
    QVERIFY2(started && b.running(), "the joiner did not start");
    QCOMPARE(b.runId(), a.runId());
    QVERIFY(b.logContains("joining it from there, nothing to fetch"));
    const auto manifest = b.events("manifest");
    QCOMPARE(int(manifest.size()), 1);
    QCOMPARE(manifest[0].value("state").toString(), QString("installed"));
    QVERIFY(!QFileInfo::exists(dir_.filePath("installed-b") + "/joined"));
    a.terminate();
    b.terminate();
    QVERIFY(waitUntil([&] { return !a.running() && !b.running(); }, 60000));
  }

  // Issue 40: a run made with `create-run` from a corpus no client ships (here the bundled text
  // under other names and folders) is hosted from its folder and joined by its magnet link
  // alone: the joiner fetches run.json, tokenizer.json, the validation shard and the training
  // shards assigned to it within its --data-budget-mib, trains no tokenizer, seeds what it holds
  // (its fetch state kept in the folder) and merges every round with the host. The default preset, as in the test
  // above: its rounds are long enough for the joiner to arrive while the host is in round 1 (the
  // tiny preset's 5 steps take 0.1 s: the host was done before the joiner had the manifest).
  void aCreatedRunIsJoinedByMagnetWithItsData() {
    const QString corpus = dir_.filePath("my-corpus");
    QVERIFY(QDir().mkpath(corpus + "/part"));
    QVERIFY(QFile::copy(ES_SHARE_DIR "/runs/sotu-text/corpus/sotu-train.txt", corpus + "/speeches.txt"));
    QVERIFY(QFile::copy(ES_SHARE_DIR "/runs/sotu-text/corpus/sotu-val.txt", corpus + "/part/more.txt"));
    const QString runDir = dir_.filePath("my-run");
    QProcess create;
    create.start(ES_CLIENT_BINARY, {"create-run", "--out", runDir, "--preset", "default", "--sync-every", "5", corpus});
    QVERIFY(create.waitForFinished(300000));
    const QString printed = create.readAllStandardOutput();
    QVERIFY2(create.exitCode() == 0, qPrintable(create.readAllStandardError()));
    const QRegularExpression magnet("magnet:\\?xt=urn:btmh:1220([0-9a-f]{64})");
    const auto match = magnet.match(printed);
    QVERIFY2(match.hasMatch(), qPrintable(printed));
    QVERIFY(!QFileInfo::exists(runDir + "/corpus"));  // the text stays where it was

    const int port = freeLoopbackPort();
    QVERIFY(port > 0);
    const QString first = QString("127.0.0.1:%1").arg(port);
    SwarmClient a("a", args("created-a", first) << "--run" << runDir);
    QVERIFY2(waitUntil([&] { return !a.runId().isEmpty() || !a.running(); }, 120000), "the host did not start");
    QCOMPARE(a.runId(), match.captured(1));  // the id create-run printed is the one the host serves
    // 3 MiB of shards: fewer than the host's (2 MiB each, the last one less), as assigned to b.
    SwarmClient b("b", args("created-b", "127.0.0.1:0")
                           << "--run" << match.captured(0) << "--bootstrap" << first << "--data-budget-mib"
                           << "3");
    trainedTogether(a, b);
    if (QTest::currentTestFailed()) return;
    QVERIFY2(!b.logContains("Tokenizer trained"), "the joiner trained a tokenizer of its own");
    const QString fetched = dir_.filePath("created-b") + "/joined/" + a.runId().left(16) + "/my-run";
    for (const char* file : {"run.json", "tokenizer.json", "data/val.bin"})
      QVERIFY2(QFileInfo(fetched + "/" + file).isFile(), file);
    // Only its shards came, within the budget, and it said how many.
    const auto shards = QDir(fetched + "/data").entryInfoList({"train-*.bin"}, QDir::Files);
    qint64 bytes = 0;
    for (const auto& f : shards) bytes += f.size();
    const auto all = QDir(runDir + "/data").entryList({"train-*.bin"}, QDir::Files).size();
    QVERIFY2(!shards.isEmpty() && shards.size() < all && bytes <= 3 << 20,
             qPrintable(QString("%1 of %2 shards, %3 bytes").arg(shards.size()).arg(all).arg(bytes)));
    QVERIFY2(b.logContains(QString("Fetching %1 of the run's %2 training shards").arg(shards.size()).arg(all)),
             "the joiner did not say which shards it fetched");
  }

  // A torrent of `path` that keeps what our torrent maker drops (p2p/torrent_maker.cpp: no
  // attributes): here an executable bit. Its bytes and v2 info-hash (hex). (A symlink takes the
  // same refusal, but a torrent of one symlink cannot be made: it has no bytes, and libtorrent
  // answers "invalid length of torrent".)
  static std::pair<std::string, std::string> torrentWithAttributes(const QString& path) {
    lt::file_storage files;
    lt::add_files(files, path.toStdString());
    lt::create_torrent ct(files, 16 * 1024);
    lt::set_piece_hashes(ct, QFileInfo(path).path().toStdString());
    std::string bytes;
    lt::bencode(std::back_inserter(bytes), ct.generate());
    const lt::torrent_info info(bytes, lt::from_span);
    std::ostringstream hex;
    hex << info.info_hashes().v2;
    return {bytes, hex.str()};
  }

  // The hostile run torrents: the bundled manifest beside a second file, under another name,
  // padded with spaces to 1 MiB (still valid JSON: only its size is wrong), and executable. A swarm_probe seeds
  // each as its run; the joiner must refuse it before a piece is asked for, say why, and leave no
  // folder of it in its data directory.
  void refusesARunTorrentThatIsNotOneSmallRunJson_data() {
    QTest::addColumn<QString>("layout");
    QTest::addColumn<QString>("why");
    QTest::newRow("two files") << "two"
                               << "no tokenizer.json";
    QTest::newRow("a gap in the shards") << "gap"
                                         << "\"data/train-002.bin\", which is not a file of a prepared run";
    QTest::newRow("another name") << "name"
                                  << "a file named \"manifest.json\", expected \"run.json\"";
    QTest::newRow("1 MiB") << "big"
                           << "a file of 1048576 bytes, more than the 65536";
    QTest::newRow("executable") << "exec"
                                << "a file with attributes (a symlink, executable or hidden), expected a plain file";
  }
  void refusesARunTorrentThatIsNotOneSmallRunJson() {
    QFETCH(QString, layout);
    QFETCH(QString, why);
    const QString seedDir = dir_.filePath("bad-" + layout);
    const QString content = makeBadRun(seedDir, layout);
    QVERIFY(!content.isEmpty());
    std::pair<std::string, std::string> torrent;
    if (layout == "exec") {
      torrent = torrentWithAttributes(content);
    } else {
      auto made = es::p2p::makeTorrent(content.toStdString());
      QVERIFY2(made.ok(), made.ok() ? "" : made.error().c_str());
      torrent = {made->bytes, made->infoHashV2};
    }
    QFile file(seedDir + "/run.torrent");
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(torrent.first.data(), qint64(torrent.first.size()));
    file.close();
    Probe seed("seed-" + layout, {"--listen", "127.0.0.1:0", "--key", seedDir + "/seed.key", "--run",
                                  seedDir + "/run.torrent", "--run-dir", seedDir + "/content"});
    QString endpoint;
    QVERIFY(waitUntil(
        [&] {
          endpoint = seed.find([](auto& e) { return isEvent(e, "ready"); }).value("endpoint").toString();
          return !endpoint.isEmpty();
        },
        10000));
    const QString hash = QString::fromStdString(torrent.second);
    const QString data = dir_.filePath("joiner-" + layout);
    SwarmClient j("j-" + layout, args("joiner-" + layout, "127.0.0.1:0")
                                     << "--run"
                                     << "magnet:?xt=urn:btmh:1220" + hash << "--bootstrap" << endpoint);
    const bool done = waitUntil([&] { return !j.running(); }, 90000);
    qInfo().noquote() << "joiner:" << j.log().join("\n  ");
    QVERIFY2(done, "the joiner neither refused the run torrent nor failed");
    QVERIFY2(j.finishedWith(1), qPrintable(j.exitState()));
    QVERIFY2(
        j.logContains("the run's torrent is neither one run.json of at most 65536 bytes nor a prepared run's folder"),
        "no clear reason");
    QVERIFY2(j.logContains(why), qPrintable(why));
    QVERIFY2(!QFileInfo::exists(data + "/joined/" + hash.left(16)), "the refused torrent's folder was left behind");
    QVERIFY(j.events("started").empty());  // it never trained on it
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
