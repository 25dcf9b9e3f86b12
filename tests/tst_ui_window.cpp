// The desktop window over a fake engine (support/fake_engine.h), on the offscreen platform: what
// the engine reports lands in the chart, the peer map and the expert map; the loss history of a
// run comes back from a real SQLite ledger; settings are saved and reach the engine; the donor's
// menu commands reach it too. (The real engine under the window: tst_gui_swarm.)
#include "core/store/ledger.h"
#include "support/fake_engine.h"
#include "ui/dashboard.h"
#include "ui/desktop_app.h"
#include "ui/donation_controller.h"
#include "ui/expert_map_widget.h"
#include "ui/log_view.h"
#include "ui/main_window.h"
#include "ui/model_view.h"
#include "ui/peer_map_widget.h"
#include "ui/peers_view.h"
#include "ui/transfers_view.h"

#include <QAction>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QtTest>

using namespace es;

namespace {

node::RunInfo runInfo(const QString& ledgerPath, int syncEvery = 5) {
  node::RunInfo info;
  info.runName = "sotu-default";
  info.runId = std::string(64, 'a');
  info.selfId = std::string(40, '1');
  info.ledgerPath = ledgerPath.toStdString();
  info.listen = "127.0.0.1:6881";
  info.device = "cpu";
  info.nExperts = 8;
  info.nLayers = 4;
  info.syncEvery = syncEvery;
  return info;
}

node::SwarmView threePeers() {
  node::SwarmView v;
  v.runId = std::string(64, 'a');
  v.selfId = std::string(40, '1');
  v.nExperts = 8;
  v.nLayers = 4;
  v.round = 2;
  const std::vector<std::vector<int>> claims{{0, 1, 2}, {3, 4, 5}, {6, 7, 0}};
  for (int i = 0; i < 3; ++i) {
    node::PeerView p;
    p.id = std::string(40, char('1' + i));
    p.self = i == 0;
    p.round = 2;
    p.claims = claims[i];
    v.peers.push_back(p);
  }
  node::TransferView t;
  t.contentId = std::string(64, 'c');
  t.peer = std::string(40, '2');
  t.kind = "contribution";
  t.round = 2;
  t.totalBytes = 1000;
  t.doneBytes = 400;
  t.connections = 1;
  v.transfers.push_back(t);
  return v;
}

}  // namespace

class UiWindow : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  std::unique_ptr<QSettings> store_;

  std::unique_ptr<ui::DesktopApp> makeApp(test::FakeEngine& engine, const QString& name) {
    store_ = std::make_unique<QSettings>(dir_.filePath(name + ".ini"), QSettings::IniFormat);
    return std::make_unique<ui::DesktopApp>(engine, *store_, "/usr/bin/expertswarm");
  }

 private Q_SLOTS:
  void chartGetsAPointPerStepAndPerRound() {
    test::FakeEngine engine;
    auto app = makeApp(engine, "chart");
    Q_EMIT engine.started(runInfo(dir_.filePath("no-ledger-here.db")));
    auto* dash = app->window()->dashboard();
    QCOMPARE(dash->trainPointCount(), 0);
    for (int step = 1; step <= 10; ++step) Q_EMIT engine.stepped({step, 0.1, 8.0 - step * 0.1, 1e-3, 1000});
    node::RoundSummary r1, r2;
    r1.round = 1;
    r1.valLoss = 7.6;
    r2.round = 2;
    r2.valLoss = 7.2;
    Q_EMIT engine.roundClosed(r1);
    Q_EMIT engine.roundClosed(r2);
    QCOMPARE(dash->trainPointCount(), 10);
    QCOMPARE(dash->valPointCount(), 2);
    QCOMPARE(dash->roundsWithTrainPoints(), (std::set<std::int64_t>{1, 2}));
    QCOMPARE(dash->roundsWithValPoints(), (std::set<std::int64_t>{1, 2}));
    // A missing ledger is said in the log, not fatal.
    QVERIFY(app->window()->log()->text().contains("History not shown"));
  }

  // Issue 16: a step's GPU reading is shown as it was measured; a step without one leaves it.
  void dashboardShowsTheGpuReading() {
    test::FakeEngine engine;
    auto app = makeApp(engine, "gpu");
    auto* dash = app->window()->dashboard();
    QCOMPARE(dash->gpuText(), QStringLiteral("—"));
    node::StepReport step{1, 0.1, 8.0, 1e-3, 1000};
    step.gpu = node::GpuReading{87, 23LL << 30, 80LL << 30, 71, 301.4};
    Q_EMIT engine.stepped(step);
    QCOMPARE(dash->gpuText(), QStringLiteral("87 % · 23.0 of 80.0 GiB · 71 °C · 301 W"));
    Q_EMIT engine.stepped({2, 0.1, 7.9, 1e-3, 1000});
    QCOMPARE(dash->gpuText(), QStringLiteral("87 % · 23.0 of 80.0 GiB · 71 °C · 301 W"));
  }

  void statusBarShowsWhereWeStandOnTheNetwork() {
    test::FakeEngine engine;
    auto app = makeApp(engine, "network");
    const QString summary =
        QStringLiteral("reachable via port mapping · external 198.18.1.2:40001 · listening on 10.0.0.2:40001");
    Q_EMIT engine.networkStatus(summary);
    QCOMPARE(app->window()->networkLabel()->text(), summary);
    QVERIFY(app->window()->statusBar()->isAncestorOf(app->window()->networkLabel()));
  }

  void mapsFollowTheSwarm() {
    test::FakeEngine engine;
    auto app = makeApp(engine, "maps");
    Q_EMIT engine.swarmChanged(threePeers());
    auto* window = app->window();
    QCOMPARE(window->peers()->map()->peerCount(), 3);
    QCOMPARE(window->peers()->map()->peerIds().first(), QString(40, '1'));
    QCOMPARE(window->peers()->map()->edgeCount(), 1);  // the contribution we fetch from peer 2
    QCOMPARE(window->experts()->ownersOf(0), (QStringList{QString(40, '1'), QString(40, '3')}));
    QCOMPARE(window->experts()->replicaCount(0), 2);
    QVERIFY(window->experts()->claimedBySelf(1));
    QVERIFY(!window->experts()->claimedBySelf(4));
    QCOMPARE(window->transfers()->rowCount(), 1);
    node::RoundSummary s;
    s.round = 2;
    s.updatedExperts = {3, 4, 5};
    Q_EMIT engine.roundClosed(s);
    QCOMPARE(window->experts()->lastUpdateRound(4), std::int64_t(2));
    QCOMPARE(window->experts()->lastUpdateRound(0), std::int64_t(0));
  }

  void historyComesBackFromTheLedger() {
    const auto dbPath = dir_.filePath("history.db").toStdString();
    const auto runId = std::string(64, 'a');
    {
      auto ledger = store::Ledger::open(dbPath, ES_SHARE_DIR "/sql");
      QVERIFY2(ledger.ok(), ledger.ok() ? "" : ledger.error().c_str());
      (*ledger)->joinRun(runId, "sotu-default");
      for (int step = 1; step <= 15; ++step)
        (*ledger)->addMetric(runId, {step, (step - 1) / 5 + 1, 8.0 - 0.05 * step, std::nullopt, 1e-3, 900, 0});
      // A round's row replaces the row of the step at which its merge landed (one row per step).
      for (int round = 1; round <= 3; ++round)
        (*ledger)->addMetric(runId, {round * 5, round, 8.0 - 0.05 * round * 5, 7.9 - 0.2 * round, 1e-3, 900, 0});
      QVERIFY((*ledger)->flush().ok());
    }
    test::FakeEngine engine;
    auto app = makeApp(engine, "history");
    Q_EMIT engine.started(runInfo(QString::fromStdString(dbPath)));
    auto* dash = app->window()->dashboard();
    QCOMPARE(dash->trainPointCount(), 15);
    QCOMPARE(dash->valPointCount(), 3);
    QCOMPARE(dash->roundsWithValPoints(), (std::set<std::int64_t>{1, 2, 3}));
    // Live steps after a restart replace what the crashed process trained past its last merge.
    Q_EMIT engine.stepped({11, 0.1, 7.0, 1e-3, 900});
    QCOMPARE(dash->trainPointCount(), 11);
  }

  // Issue 17 item 4: the Model tab shows the samples of the last rounds from a real ledger file,
  // newest first, then each eval round's sample as it closes (a rewritten round replaces its row).
  void modelTabShowsTheSamplesOfTheLastRounds() {
    const auto dbPath = dir_.filePath("samples.db").toStdString();
    const auto runId = std::string(64, 'b');
    {
      auto ledger = store::Ledger::open(dbPath, ES_SHARE_DIR "/sql");
      QVERIFY2(ledger.ok(), ledger.ok() ? "" : ledger.error().c_str());
      (*ledger)->joinRun(runId, "sotu-default");
      (*ledger)->addSample(runId, {2, "The union", " is is is the the", 7.5, 0});
      (*ledger)->addSample(runId, {4, "The union", " is strong and \x1b[31mfree\xff", 6.25, 0});
      (*ledger)->joinRun(std::string(64, 'c'), "another");
      (*ledger)->addSample(std::string(64, 'c'), {6, "Another run", " not shown", 1.0, 0});
      QVERIFY((*ledger)->flush().ok());
    }
    test::FakeEngine engine;
    auto app = makeApp(engine, "samples");
    auto info = runInfo(QString::fromStdString(dbPath));
    info.runId = runId;
    Q_EMIT engine.started(info);
    auto* model = app->window()->model();
    QCOMPARE(model->sampleCount(), 2);
    QCOMPARE(model->textOfRound(2), QStringLiteral("The union▸ is is is the the"));
    // A control byte and invalid UTF-8 from the model show as U+FFFD, never as themselves.
    QCOMPARE(model->textOfRound(4), QStringLiteral("The union▸ is strong and \uFFFD[31mfree\uFFFD"));
    node::RoundSummary s;
    s.round = 6;
    s.valLoss = 5.5;
    s.sample = node::ModelSample{"The union", " is strong"};
    Q_EMIT engine.roundClosed(s);
    s.round = 7;  // not an eval round: no sample, no row
    s.sample.reset();
    Q_EMIT engine.roundClosed(s);
    QCOMPARE(model->sampleCount(), 3);
    QCOMPARE(model->textOfRound(6), QStringLiteral("The union▸ is strong"));
  }

  // The Model tab's export runs `<executable> export --out DIR --run <magnet of the run id>
  // --data-dir <the ledger's folder>` as a child process and logs how it ended. Here the
  // executable is a script that records its arguments.
  void exportRunsTheExportCommandForThisRun() {
    const QString script = dir_.filePath("fake-expertswarm.sh"), argsFile = dir_.filePath("export-args.txt");
    {
      QFile f(script);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QStringLiteral("#!/bin/sh\nprintf '%s\\n' \"$@\" > '%1'\n").arg(argsFile).toUtf8());
    }
    QVERIFY(QFile::setPermissions(script, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
    test::FakeEngine engine;
    store_ = std::make_unique<QSettings>(dir_.filePath("export.ini"), QSettings::IniFormat);
    ui::DesktopApp app(engine, *store_, script);
    QVERIFY(!app.exportModel(dir_.filePath("out")));  // no run yet
    Q_EMIT engine.started(runInfo(dir_.filePath("data/expertswarm.db")));
    QVERIFY(app.exportModel(dir_.filePath("out")));
    QTRY_VERIFY_WITH_TIMEOUT(app.window()->log()->text().contains(QStringLiteral("Exported the merged model")), 10000);
    QFile args(argsFile);
    QVERIFY(args.open(QIODevice::ReadOnly));
    QCOMPARE(
        QString::fromUtf8(args.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts),
        (QStringList{QStringLiteral("export"), QStringLiteral("--out"), dir_.filePath("out"), QStringLiteral("--run"),
                     QStringLiteral("magnet:?xt=urn:btmh:1220") + QString(64, QLatin1Char('a')),
                     QStringLiteral("--data-dir"), dir_.filePath("data")}));
  }

  void settingsAreSavedAndReachTheEngine() {
    test::FakeEngine engine;
    auto app = makeApp(engine, "settings");
    QVERIFY(!engine.rateLimitCalls.empty());  // applied once at start
    auto settings = app->settings();
    settings.uploadLimitKiB = 100;
    settings.downloadLimitKiB = 2048;
    settings.claimSize = 3;
    app->applySettings(settings);
    QCOMPARE(engine.rateLimitCalls.back(), (std::pair<int, int>{100 * 1024, 2048 * 1024}));
    const auto reloaded = settings::ClientSettings::load(*store_);
    QCOMPARE(reloaded.uploadLimitKiB, 100);
    QCOMPARE(reloaded.claimSize, 3);
  }

  void menuCommandsReachTheEngine() {
    test::FakeEngine engine;
    auto app = makeApp(engine, "menu");
    auto* window = app->window();
    window->pauseAction()->trigger();
    QCOMPARE(engine.pauseCalls, (std::vector<bool>{true}));
    QVERIFY(app->donation()->paused());
    window->pauseAction()->trigger();  // unchecked again: resume
    QCOMPARE(engine.pauseCalls, (std::vector<bool>{true, false}));
    window->finishRoundAction()->trigger();
    QCOMPARE(engine.finishRoundCalls, 1);
    Q_EMIT engine.pausedChanged(true);  // the engine reports the pause at the round's end
    QVERIFY(window->pauseAction()->isChecked());
    window->quitAction()->trigger();
    QCOMPARE(engine.quitCalls, 1);
  }

  void closingTheWindowWithoutATrayQuitsTheEngine() {
    test::FakeEngine engine;
    auto app = makeApp(engine, "close");
    app->show();
    QVERIFY(QTest::qWaitForWindowExposed(app->window()));
    app->window()->close();
    QCOMPARE(engine.quitCalls, 1);
  }
};

QTEST_MAIN(UiWindow)
#include "tst_ui_window.moc"
