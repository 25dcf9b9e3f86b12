// Issue 14, fetched content, on real libtorrent sessions (processes on 127.0.0.1):
//  1. swarm_probe peers: a fetch whose metadata breaks its predicted size (one byte short, 10×)
//     is refused before a piece is written (0 bytes on disk), the exact size is fetched.
//  2. Two honest `expertswarm` peers among three hostile probes for kRounds rounds: one publishes
//     a copy of an honest peer's contribution under the honest file name (same size, one byte
//     changed), one a contribution 10× the predicted size, one announces contributions it never
//     seeds. Honest verdicts stay (both honest contributions merged every round), the two liars
//     are banned, the oversized one never gets a byte on disk, and afterwards incoming/, the
//     session's torrents and the run folder are bounded.
#include "support/swarm_clients.h"
#include "support/swarm_probes.h"

#include <QCryptographicHash>
#include <QDirIterator>
#include <QJsonArray>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QTemporaryDir>

#include <set>

using namespace es::test;

namespace {

struct FolderStats {
  qint64 bytes = 0;
  int files = 0;
};

FolderStats statsOf(const QString& dir) {
  FolderStats s;
  QDirIterator it(dir, QDir::Files | QDir::Hidden | QDir::NoSymLinks, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    it.next();
    s.bytes += it.fileInfo().size();
    ++s.files;
  }
  return s;
}

bool writeFile(const QString& path, const QByteArray& bytes) {
  QDir().mkpath(QFileInfo(path).absolutePath());
  QFile f(path);
  return f.open(QIODevice::WriteOnly) && f.write(bytes) == bytes.size();
}

QByteArray randomBytes(qint64 n) {
  QByteArray b(n, Qt::Uninitialized);
  QRandomGenerator rng(7);
  rng.fillRange(reinterpret_cast<quint32*>(b.data()), n / 4);
  return b;
}

// The experts a contribution file carries (its tensor names): the claims that predict its size.
QString expertsIn(const QByteArray& file) {
  std::set<int> experts;
  static const QRegularExpression re(QStringLiteral("\"layers\\.\\d+\\.moe\\.experts\\.(\\d+)\\.w1\""));
  for (auto it = re.globalMatch(QString::fromLatin1(file.left(200000))); it.hasNext();)
    experts.insert(it.next().captured(1).toInt());
  QStringList out;
  for (int e : experts) out << QString::number(e);
  return out.join(',');
}

}  // namespace

class SwarmFetch : public QObject {
  Q_OBJECT

  // 4 rounds by default (220 s on 2 loaded cores); ES_FETCH_ROUNDS=10 for the ten (608 s,
  // passed at the commit that added this line).
  const int kRounds = qEnvironmentVariableIntValue("ES_FETCH_ROUNDS") > 0
                          ? qEnvironmentVariableIntValue("ES_FETCH_ROUNDS")
                          : 4;
  QTemporaryDir dir_;

  static QString readyEndpoint(Probe& p) {
    waitUntil([&] { return !p.find([](auto& e) { return isEvent(e, "ready"); }).isEmpty(); }, 10000);
    return p.find([](auto& e) { return isEvent(e, "ready"); }).value("endpoint").toString();
  }
  static QJsonObject eventFor(const Probe& p, const char* kind, const QString& hash) {
    return p.find([&](const QJsonObject& e) { return isEvent(e, kind) && e.value("hash").toString() == hash; });
  }

 private Q_SLOTS:
  void metadataBreakingThePredictedSizeIsRefusedBeforeAPiece() {
    Probe boot("boot", {"--listen", "127.0.0.1:0", "--key", dir_.filePath("boot.key")});
    const auto node = readyEndpoint(boot);
    Probe a("a", {"--listen", "127.0.0.1:0", "--bootstrap", node, "--key", dir_.filePath("a.key")});
    Probe b("b", {"--listen", "127.0.0.1:0", "--bootstrap", node, "--key", dir_.filePath("b.key")});
    QVERIFY(!readyEndpoint(a).isEmpty() && !readyEndpoint(b).isEmpty());
    const qint64 size = 8 << 20;
    QVERIFY(writeFile(dir_.filePath("a/c.safetensors"), randomBytes(size)));
    QVERIFY(writeFile(dir_.filePath("a/huge/c.safetensors"), randomBytes(10 * size)));
    const auto exact =
        ask(a, "publish " + dir_.filePath("a/c.safetensors"), "published", 60000).value("hash").toString();
    const auto huge =
        ask(a, "publish " + dir_.filePath("a/huge/c.safetensors"), "published", 60000).value("hash").toString();
    QCOMPARE(exact.size(), 64);
    QCOMPARE(huge.size(), 64);
    // One byte short of the real size, and the 10× file against the size it should have had.
    b.send(QString("fetch %1 %2 %3").arg(exact, dir_.filePath("b/short")).arg(size - 1));
    b.send(QString("fetch %1 %2 %3").arg(huge, dir_.filePath("b/huge")).arg(size));
    qint64 mostOnDisk = 0;
    QVERIFY2(waitUntil(
                 [&] {
                   mostOnDisk = std::max(
                       {mostOnDisk, statsOf(dir_.filePath("b/short")).bytes, statsOf(dir_.filePath("b/huge")).bytes});
                   return !eventFor(b, "refused", exact).isEmpty() && !eventFor(b, "refused", huge).isEmpty();
                 },
                 60000),
             "the metadata was not refused");
    qInfo() << "refused:" << eventFor(b, "refused", huge).value("reason").toString();
    QCOMPARE(mostOnDisk, qint64(0));
    QCOMPARE(statsOf(dir_.filePath("b")).bytes, qint64(0));
    const auto status = ask(b, "status", "status");
    QCOMPARE(status.value("refused").toInt(), 2);
    QCOMPARE(status.value("transfers").toArray().size(), 0);  // removed from the session
    // The exact size passes and arrives whole.
    b.send(QString("fetch %1 %2 %3,%4").arg(exact, dir_.filePath("b/ok")).arg(size - 7).arg(size));
    QVERIFY2(waitUntil([&] { return !eventFor(b, "finished", exact).isEmpty(); }, 60000),
             "the exact size was not fetched");
    QCOMPARE(statsOf(dir_.filePath("b/ok")).bytes, size);
    QVERIFY(eventFor(b, "finished", huge).isEmpty());
    // The one file's name becomes a path and a log line: an escape byte and 150 characters are
    // refused at the metadata too (issue 14 item 3), whatever the size.
    const QString odd = "c\x1b[31m" + QString(150, 'x') + ".safetensors";
    QVERIFY(writeFile(dir_.filePath("a/odd/" + odd), randomBytes(size)));
    const auto oddHash =
        ask(a, "publish " + dir_.filePath("a/odd/" + odd), "published", 60000).value("hash").toString();
    QCOMPARE(oddHash.size(), 64);
    b.send(QString("fetch %1 %2 %3").arg(oddHash, dir_.filePath("b/odd")).arg(size));
    QVERIFY2(waitUntil([&] { return !eventFor(b, "refused", oddHash).isEmpty(); }, 60000),
             "the odd name was not refused");
    QVERIFY(eventFor(b, "refused", oddHash).value("reason").toString().contains("file name"));
    QCOMPARE(statsOf(dir_.filePath("b/odd")).bytes, qint64(0));
    alertsDroppedByLibtorrentLoseNothing(node, exact, huge, size);
  }

  // Content retired with its file and fetched again at once (a snapshot or contribution whose
  // transfer failed is fetched again 0.5 s later) arrives whole and stays: libtorrent deletes the
  // old file on its disk threads after remove_torrent returned, so the fetch waits for that
  // deletion (p2p/swarm_deletions.cpp). Without the wait this passed 10 of 10 runs here: it holds
  // the order of operations and the alert's handling (ignored, the 20 s below are missed), not a
  // reproduction of the snapshot found gone at afd6a98.
  void aFetchRightAfterARetireKeepsItsFile() {
    Probe boot("boot", {"--listen", "127.0.0.1:0", "--key", dir_.filePath("rboot.key")});
    const auto node = readyEndpoint(boot);
    Probe a("a", {"--listen", "127.0.0.1:0", "--bootstrap", node, "--key", dir_.filePath("ra.key")});
    Probe b("b", {"--listen", "127.0.0.1:0", "--bootstrap", node, "--key", dir_.filePath("rb.key")});
    QVERIFY(!readyEndpoint(a).isEmpty() && !readyEndpoint(b).isEmpty());
    const QByteArray bytes = randomBytes(32 << 20);
    const QString expected = QCryptographicHash::hash(bytes, QCryptographicHash::Sha256).toHex();
    QVERIFY(writeFile(dir_.filePath("ra/snapshot.safetensors"), bytes));
    const auto hash =
        ask(a, "publish " + dir_.filePath("ra/snapshot.safetensors"), "published", 60000).value("hash").toString();
    QCOMPARE(hash.size(), 64);
    const QString into = dir_.filePath("rb/incoming");
    const QString file = into + "/snapshot.safetensors";
    auto doneBytes = [&] {
      const auto transfers = ask(b, "status", "status").value("transfers").toArray();
      return transfers.isEmpty() ? qint64(0) : transfers.first().toObject().value("done").toInteger();
    };
    // Served at 8 MiB/s: each fetch is retired part-way, its partial file still being written.
    a.send(QString("limit %1 %2").arg(hash).arg(8 << 20));
    b.send(QString("fetch %1 %2").arg(hash, into));
    for (int attempt = 1; attempt <= 6; ++attempt) {
      QVERIFY2(waitUntil([&] { return doneBytes() > (attempt % 3) * (8 << 20); }, 60000),
               qPrintable(QString("fetch %1 made no progress").arg(attempt)));
      b.send(QString("refetch %1 %2").arg(hash, into));
    }
    a.send(QString("limit %1 0").arg(hash));
    auto finished = [&] {
      return b.find([&](const QJsonObject& e) { return isEvent(e, "finished") && e.value("hash") == hash; });
    };
    // Well within the 30 s after which a deletion whose alert never came is taken as done: the
    // deferred fetches started on libtorrent's word (torrent_deleted_alert), not on that timeout.
    QVERIFY2(waitUntil([&] { return !finished().isEmpty(); }, 20000), "the last fetch did not finish within 20 s");
    QCOMPARE(finished().value("sha256").toString(), expected);  // whole when reported
    QCOMPARE(ask(b, "status", "status").value("transfers").toArray().size(), 1);
    QCOMPARE(QFileInfo(file).size(), qint64(bytes.size()));  // and still there after a round trip
  }

  // Issue 13 item 6: a peer whose libtorrent alert queue holds one alert (most alerts dropped,
  // among them the metadata and finished alerts the transfers wait for) still refuses the 10×
  // file and fetches the exact one whole: on alerts_dropped_alert every transfer is re-checked
  // from its state (SwarmSession::Impl::reconcileTransfers).
  void alertsDroppedByLibtorrentLoseNothing(const QString& node, const QString& exact, const QString& huge,
                                            qint64 size) {
    Probe c("c",
            {"--listen", "127.0.0.1:0", "--bootstrap", node, "--key", dir_.filePath("c.key"), "--alert-queue", "1"});
    QVERIFY(!readyEndpoint(c).isEmpty());
    c.send(QString("fetch %1 %2 %3").arg(huge, dir_.filePath("c/huge")).arg(size));
    c.send(QString("fetch %1 %2 %3").arg(exact, dir_.filePath("c/ok")).arg(size));
    QVERIFY2(
        waitUntil([&] { return !eventFor(c, "refused", huge).isEmpty() && !eventFor(c, "finished", exact).isEmpty(); },
                  60000),
        "with dropped alerts a transfer was lost");
    QCOMPARE(statsOf(dir_.filePath("c/huge")).bytes, qint64(0));
    QCOMPARE(statsOf(dir_.filePath("c/ok")).bytes, size);
    const auto status = ask(c, "status", "status");
    qInfo() << "alert drops seen:" << status.value("droppedAlerts").toInt();
    QVERIFY(status.value("droppedAlerts").toInt() > 0);
  }

  void hostilePeersCannotTouchHonestVerdictsOrTheDisk();

 private:
  std::vector<std::unique_ptr<SwarmClient>> honest_;
  std::vector<std::unique_ptr<Probe>> hostile_;  // namer, huge, ghost
  QString runDir_[2];                            // the honest peers' run folders (data dir/runs/<run id>)
  std::map<int, QString> published_[3];          // hostile → round → content id it announced
  qint64 seq_ = 1;

  void startHonest(const QString& bootstrap);
  bool joinHostile(const QString& bootstrap);
  void act(int round, const QString& honestFile);
  void checkBounded();
};

void SwarmFetch::startHonest(const QString& bootstrap) {
  // The bundled run's full steps: with light ones a clean CI run ended with 8 torrents in a
  // session (checkBounded); not understood then (3 runs with light steps here since: 6 each), so
  // this test keeps the steps it was measured with. A failure names each kind's files now.
  const auto run = customRun(dir_.filePath("run"),
                             {{"deadline", QJsonObject{{"factor", 2.0}, {"min_seconds", 15}, {"max_seconds", 60}}}},
                             /*lightSteps=*/false);
  for (int i = 0; i < 2; ++i) {
    const auto args = swarmPeerArgs(run, dir_.filePath(QString("honest%1").arg(i)), i, bootstrap, 4, kRounds);
    honest_.push_back(std::make_unique<SwarmClient>(QString("honest%1").arg(i), args));
  }
}

// The hostile probes join the run with peer 0's run torrent, once it made it.
bool SwarmFetch::joinHostile(const QString& bootstrap) {
  const bool made = waitUntil(
      [&] {
        for (int i = 0; i < 2; ++i) {
          QDirIterator it(dir_.filePath(QString("honest%1/runs").arg(i)), {"run.torrent"}, QDir::Files,
                          QDirIterator::Subdirectories);
          if (it.hasNext()) runDir_[i] = QFileInfo(it.next()).absolutePath();
        }
        return !runDir_[0].isEmpty() && !runDir_[1].isEmpty();
      },
      120000);
  if (!made) return false;
  for (const QString k : {"namer", "huge", "ghost"}) {
    QDir().mkpath(dir_.filePath(k));
    QFile::copy(runDir_[0] + "/run.json", dir_.filePath(k + "/run.json"));
    hostile_.push_back(std::make_unique<Probe>(
        k, QStringList{"--listen", "127.0.0.1:0", "--bootstrap", bootstrap, "--key", dir_.filePath(k + ".key"), "--run",
                       runDir_[0] + "/run.torrent", "--run-dir", dir_.filePath(k), "--work-bits",
                       QString::number(kCustomRunWorkBits)}));
    if (readyEndpoint(*hostile_.back()).isEmpty()) return false;
  }
  return true;
}

// The hostile peers' round: honest peer 0's contribution file is the model. The namer publishes
// it under its name with one byte changed (same size: it passes the metadata check and must fail
// validation), the huge one 10× that size, the ghost an id nobody seeds; all claim its experts.
void SwarmFetch::act(int round, const QString& honestFile) {
  QFile f(honestFile);
  if (!f.open(QIODevice::ReadOnly)) return;
  QByteArray bytes = f.readAll();
  const QString claims = expertsIn(bytes);
  bytes[bytes.size() - 100] = char(bytes[bytes.size() - 100] ^ 0x5a);
  const QString name = QFileInfo(honestFile).fileName();
  const QString paths[2] = {dir_.filePath(QString("namer/%1/%2").arg(round).arg(name)),
                            dir_.filePath(QString("huge/%1/%2").arg(round).arg(name))};
  writeFile(paths[0], bytes);
  writeFile(paths[1], randomBytes(10 * bytes.size()));
  for (int h = 0; h < 3; ++h) {
    published_[h][round] =
        h < 2 ? ask(*hostile_[h], "publish " + paths[h], "published", 60000).value("hash").toString()
              : QString(QCryptographicHash::hash(QByteArray::number(round), QCryptographicHash::Sha256).toHex());
    QStringList contrib;
    for (const auto& [r, id] : published_[h])
      if (r + 2 > round) contrib << QString("%1=%2").arg(r).arg(id);
    hostile_[h]->send(
        QString("record %1 %2 %3 %4 %5").arg(++seq_).arg(round).arg(claims).arg(round + 3).arg(contrib.join(',')));
  }
}

void SwarmFetch::hostilePeersCannotTouchHonestVerdictsOrTheDisk() {
  const QString bootstrap = QString("127.0.0.1:%1").arg(freeLoopbackPort());
  startHonest(bootstrap);
  QVERIFY2(joinHostile(bootstrap), "the hostile probes did not join the run");
  qint64 hugeMostOnDisk = 0;
  const bool done = waitUntil(
      [&] {
        QDirIterator it(runDir_[0] + "/contrib", {"round-*.safetensors"}, QDir::Files);
        while (it.hasNext()) {
          const QString path = it.next();
          const int round = QFileInfo(path).fileName().section('-', 1, 1).toInt();
          if (round > 0 && !published_[0].count(round)) act(round, path);
        }
        for (int i = 0; i < 2; ++i)
          for (const auto& [r, id] : published_[1])
            hugeMostOnDisk =
                std::max(hugeMostOnDisk, statsOf(runDir_[i] + QString("/incoming/%1/%2").arg(r).arg(id)).bytes);
        return !honest_[0]->running() && !honest_[1]->running();
      },
      900000);
  for (auto& p : honest_)
    qInfo().noquote() << p->name() << p->log().filter(QRegularExpression("reject|refused|quota|Summary")).join("\n  ");
  QVERIFY2(done, "the honest peers did not finish");
  // Honest verdicts unchanged: both honest contributions merged in every round.
  for (auto& p : honest_) {
    QVERIFY2(p->finishedWith(0), qPrintable(p->name() + ": " + p->exitState()));
    QCOMPARE(int(p->rounds().size()), kRounds);
    for (const auto& [r, line] : p->rounds()) QCOMPARE(line.peers, 2);
    QStringList reasons;  // the ban events (`--events`): the namer and the oversized one, never the ghost
    for (const auto& ban : p->events("ban")) reasons << ban.value("reason").toString();
    QCOMPARE(reasons.size(), 2);
    QVERIFY2(reasons.join('|').contains("refused before download"), qPrintable(reasons.join('|')));
    QVERIFY2(reasons.join('|').contains("file names sender"), qPrintable(reasons.join('|')));
  }
  qInfo("oversized contribution: at most %lld bytes on disk", hugeMostOnDisk);
  QCOMPARE(hugeMostOnDisk, qint64(0));
  checkBounded();
}

// Bounded afterwards: incoming/ holds the other honest peer's last two rounds (+ a snapshot);
// the session our last two contributions, the two fetched, our two snapshots and the one we
// fetched, if we fetched one — each kind bounded on its own, so a failure says which one grew
// (CI runs ended with 7 and 8 torrents against a bound of 6 for all; their lists were cut from
// the log). The run folder (mostly swarm-state: weights, base, optimizer moments) stays under
// 700 MiB: measured 349–360 with one state round, 507 since the round before the newest is kept
// as the fallback for a damaged newest one (core/checkpoint/round_dirs.h, kKeptRounds 2: ~150 MiB
// a round here), and 549 and 621 (one run), 585 (another) since the bundled run is sparse: each
// state round also holds the error feedback, a float32 residual of every tensor the peer trains —
// about 32 MB, 4 × the 8.0 MB int8 contribution (issue 39).
void SwarmFetch::checkBounded() {
  for (int i = 0; i < 2; ++i) {
    const auto incoming = statsOf(runDir_[i] + "/incoming");
    const auto folder = statsOf(runDir_[i]);
    const auto& summary = honest_[i]->summary();  // the exit's summary event
    QVERIFY2(summary.contains("transfers"), qPrintable(honest_[i]->name() + " printed no summary event"));
    const int torrents = summary.value("transfers").toInt();
    qInfo("honest%d: incoming/ %d files %lld bytes; session %d torrents; run folder %d files %.1f MiB", i,
          incoming.files, incoming.bytes, torrents, folder.files, folder.bytes / 1048576.0);
    std::map<QString, QStringList> byKind;  // kind → file names
    for (const auto& file : summary.value("transfer_files").toArray()) {
      const QString path = file.toString();
      const QString kind = path.contains("/incoming/snapshots/") ? "fetched snapshots"
                           : path.contains("/incoming/")         ? "fetched contributions"
                           : path.contains("/contrib/")          ? "own contributions"
                           : path.contains("/snapshots/")        ? "own snapshots"
                                                                 : "other";
      byKind[kind] << path.section('/', -1);
    }
    QStringList counts;
    for (const auto& [kind, names] : byKind)
      counts << QString("%1 %2 (%3)").arg(names.size()).arg(kind, names.join(' '));
    const QString said = honest_[i]->name() + ": " + counts.join("; ");
    qInfo().noquote() << said;
    const std::map<QString, int> bound{{"own contributions", 2},
                                       {"own snapshots", 2},
                                       {"fetched contributions", 2},
                                       {"fetched snapshots", 1},
                                       {"other", 0}};
    for (const auto& [kind, names] : byKind) QVERIFY2(names.size() <= bound.at(kind), qPrintable(said));
    QVERIFY2(torrents == summary.value("transfer_files").toArray().size(), qPrintable(said));
    QVERIFY(incoming.files <= 3);
    QVERIFY(folder.bytes < 700ll << 20);
  }
}

QTEST_GUILESS_MAIN(SwarmFetch)
#include "tst_swarm_fetch.moc"
