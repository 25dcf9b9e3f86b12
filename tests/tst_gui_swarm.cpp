// Issue 6, acceptance 2–3, end to end: three peers on 127.0.0.1 — two headless, one with the
// desktop window under Xvfb — train the bundled run for 3 rounds. The window's chart then holds
// points of every round, its peer map shows the three peers, and the images it writes are real
// pictures. Restarted for one more round, the window shows the earlier rounds again: the history
// comes back from the SQLite ledger.
#include "support/swarm_clients.h"

#include <QImage>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>

#include <set>

using namespace es::test;

namespace {

QJsonObject readJson(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return {};
  return QJsonDocument::fromJson(file.readAll()).object();
}

std::set<int> intsOf(const QJsonValue& array) {
  std::set<int> out;
  for (const auto& v : array.toArray()) out.insert(v.toInt());
  return out;
}

// A picture, not an empty window: many distinct colours, and most of it not one flat colour.
QString blankness(const QString& path) {
  QImage image(path);
  if (image.isNull()) return "cannot read " + path;
  if (image.width() < 600 || image.height() < 400)
    return QString("too small: %1x%2").arg(image.width()).arg(image.height());
  std::map<QRgb, int> counts;
  for (int y = 0; y < image.height(); y += 2)
    for (int x = 0; x < image.width(); x += 2) ++counts[image.pixel(x, y)];
  int top = 0, total = 0;
  for (const auto& [rgb, n] : counts) {
    top = std::max(top, n);
    total += n;
  }
  if (counts.size() < 64) return QString("only %1 colours").arg(counts.size());
  if (top > total * 0.97) return "almost one flat colour";
  return {};
}

}  // namespace

class GuiSwarm : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  QStringList peerArgs(const QString& name, const QString& listen, const QString& bootstrap, int rounds) const {
    QStringList a{"--data-dir", dir_.filePath(name),     "--listen",  listen, "--sync-every", "5", "--eval-every", "5",
                  "--rounds",   QString::number(rounds), "--threads", "1"};
    if (!bootstrap.isEmpty()) a << "--bootstrap" << bootstrap;
    return a;
  }

  // The client with its window on a private X server (xvfb-run), writing its snapshot to `snap`.
  std::unique_ptr<SwarmClient> guiPeer(const QString& listen, int rounds, const QString& snap) const {
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("QT_QPA_PLATFORM", "xcb");  // the tests run offscreen; this one needs the real X11 path
    env.insert("XDG_CONFIG_HOME", dir_.filePath("gui-config"));  // the donor's settings (written below)
    QStringList args{"-a", "-s", "-screen 0 1280x800x24", ES_CLIENT_BINARY};
    args << peerArgs("gui", listen, {}, rounds) << "--ui-snapshot" << snap;
    return std::make_unique<SwarmClient>("gui", QStandardPaths::findExecutable("xvfb-run"), args, env);
  }

  static bool allDone(const std::vector<SwarmClient*>& peers) {
    for (auto* p : peers)
      if (p->running()) return false;
    return true;
  }

 private Q_SLOTS:
  void initTestCase() {
    if (QStandardPaths::findExecutable("xvfb-run").isEmpty())
      QFAIL("xvfb-run is not installed (scripts/setup installs xvfb)");
  }

  void windowFollowsThreePeersAndKeepsHistory() {
    const int port = freeLoopbackPort();
    QVERIFY(port > 0);
    const QString bootstrap = QString("127.0.0.1:%1").arg(port);
    // The donor set a bandwidth cap in the settings: it must reach the engine's session.
    {
      QSettings settings(dir_.filePath("gui-config/expertswarm/expertswarm.conf"), QSettings::IniFormat);
      settings.setValue("network/uploadLimitKiB", 8192);
    }
    auto gui = guiPeer(bootstrap, 3, dir_.filePath("snap1"));
    SwarmClient a("a", QStringList{"--no-gui"} + peerArgs("a", "127.0.0.1:0", bootstrap, 3));
    SwarmClient b("b", QStringList{"--no-gui"} + peerArgs("b", "127.0.0.1:0", bootstrap, 3));
    const std::vector<SwarmClient*> peers{gui.get(), &a, &b};
    const bool done = waitUntil([&] { return allDone(peers); }, 420000);
    for (auto* p : peers) qInfo().noquote() << p->name() << p->log().join("\n  ");
    QVERIFY2(done, "the three peers did not finish 3 rounds in 420 s");
    for (auto* p : peers) {
      QVERIFY2(p->finishedWith(0), qPrintable(p->name()));
      QCOMPARE(int(p->rounds().size()), 3);
    }
    QVERIFY2(gui->logContains("Bandwidth caps: upload 8192 KiB/s, download unlimited"),
             "the settings' cap did not reach the engine");
    for (int r = 1; r <= 3; ++r) {
      QCOMPARE(gui->rounds().at(r).peers, 3);
      QCOMPARE(gui->rounds().at(r).merged, a.rounds().at(r).merged);
      QCOMPARE(gui->rounds().at(r).merged, b.rounds().at(r).merged);
    }

    const auto state = readJson(dir_.filePath("snap1/ui-state.json"));
    QVERIFY2(!state.isEmpty(), "the window wrote no ui-state.json");
    const auto trainRounds = intsOf(state["roundsWithTrainPoints"]);
    const auto valRounds = intsOf(state["roundsWithValPoints"]);
    for (int r = 1; r <= 3; ++r) {
      QVERIFY2(trainRounds.count(r), qPrintable(QString("no training point of round %1").arg(r)));
      QVERIFY2(valRounds.count(r), qPrintable(QString("no validation point of round %1").arg(r)));
    }
    QCOMPARE(state["peerMapPeers"].toInt(), 3);
    // The map's peers are the three processes: each one's id starts with what its log printed.
    static const QRegularExpression selfLine(QStringLiteral("as peer ([0-9a-f]{16})"));
    QStringList mapIds;
    for (const auto& v : state["peerIds"].toArray()) mapIds << v.toString().left(16);
    for (auto* p : peers) {
      const auto id = selfLine.match(p->log().join('\n')).captured(1);
      QVERIFY2(!id.isEmpty() && mapIds.contains(id), qPrintable(p->name() + " is not on the peer map"));
    }
    QCOMPARE(mapIds.first(), selfLine.match(gui->log().join('\n')).captured(1));  // ourselves first
    for (const char* image : {"dashboard.png", "peers.png", "experts.png"}) {
      const auto why = blankness(dir_.filePath(QString("snap1/") + image));
      QVERIFY2(why.isEmpty(), qPrintable(QString(image) + ": " + why));
    }
    if (const auto keep = qEnvironmentVariable("ES_KEEP_SCREENSHOTS"); !keep.isEmpty()) {
      QDir().mkpath(keep);
      for (const char* image : {"dashboard.png", "peers.png", "experts.png"}) {
        QFile::remove(keep + "/" + image);
        QFile::copy(dir_.filePath(QString("snap1/") + image), keep + "/" + image);
      }
    }

    // Restart the window alone for one more round: rounds 1–3 come back from the ledger.
    auto again = guiPeer("127.0.0.1:0", 4, dir_.filePath("snap2"));
    QVERIFY2(waitUntil([&] { return !again->running(); }, 240000), "the restarted window did not finish round 4");
    qInfo().noquote() << "gui (restarted)" << again->log().join("\n  ");
    QVERIFY(again->finishedWith(0));
    QVERIFY(again->logContains("Resumed after round 3"));
    QCOMPARE(int(again->rounds().size()), 1);  // it trained round 4 only…
    const auto restarted = readJson(dir_.filePath("snap2/ui-state.json"));
    const auto history = intsOf(restarted["roundsWithValPoints"]);
    for (int r = 1; r <= 4; ++r)  // …but its chart shows all four
      QVERIFY2(history.count(r), qPrintable(QString("after the restart, no validation point of round %1").arg(r)));
    QVERIFY(intsOf(restarted["roundsWithTrainPoints"]).count(1));
  }
};

QTEST_GUILESS_MAIN(GuiSwarm)
#include "tst_gui_swarm.moc"
