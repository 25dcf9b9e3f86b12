#include "ui/main_window.h"

#include "ui/dashboard.h"
#include "ui/donation_controller.h"
#include "ui/engine_control.h"
#include "ui/expert_map_widget.h"
#include "ui/log_view.h"
#include "ui/model_view.h"
#include "ui/peers_view.h"
#include "ui/transfers_view.h"

#include <QAction>
#include <QCloseEvent>
#include <QLabel>
#include <QMenuBar>
#include <QStatusBar>
#include <QTabWidget>

namespace es::ui {

MainWindow::MainWindow(EngineControl& engine, DonationController& donation, QWidget* parent)
    : QMainWindow(parent), engine_(engine), donation_(donation) {
  setWindowTitle(tr("ExpertSwarm"));
  setWindowIcon(QIcon::fromTheme(QStringLiteral("expertswarm"), QIcon(QStringLiteral(":/icons/expertswarm-256.png"))));
  dashboard_ = new Dashboard;
  peers_ = new PeersView;
  experts_ = new ExpertMapWidget;
  transfers_ = new TransfersView;
  model_ = new ModelView;
  log_ = new LogView;
  tabs_ = new QTabWidget;
  tabs_->addTab(dashboard_, tr("Dashboard"));
  tabs_->addTab(peers_, tr("Peers"));
  tabs_->addTab(experts_, tr("Experts"));
  tabs_->addTab(transfers_, tr("Transfers"));
  tabs_->addTab(model_, tr("Model"));
  tabs_->addTab(log_, tr("Log"));
  setCentralWidget(tabs_);
  resize(1100, 680);

  auto* app = menuBar()->addMenu(tr("&ExpertSwarm"));
  settingsAction_ = app->addAction(tr("&Settings…"));
  exportAction_ = app->addAction(tr("&Export model…"));
  createRunAction_ = app->addAction(tr("&Create a run…"));
  app->addSeparator();
  quitAction_ = app->addAction(tr("&Quit"));
  quitAction_->setShortcut(QKeySequence::Quit);
  auto* training = menuBar()->addMenu(tr("&Training"));
  pauseAction_ = training->addAction(tr("&Pause"));
  pauseAction_->setCheckable(true);
  snoozeAction_ = training->addAction(tr("&Snooze 1 hour"));
  finishRoundAction_ = training->addAction(tr("&Finish this round, then pause"));

  connect(pauseAction_, &QAction::triggered, this, [this](bool checked) { donation_.setManualPause(checked); });
  connect(snoozeAction_, &QAction::triggered, this, [this] { donation_.snooze(3600); });
  connect(finishRoundAction_, &QAction::triggered, this, [this] { donation_.finishRoundThenPause(); });
  connect(quitAction_, &QAction::triggered, this, [this] {
    quitting_ = true;
    engine_.quit();
  });
  connect(&donation_, &DonationController::decisionChanged, this, &MainWindow::showDecision);

  runLabel_ = new QLabel(tr("Starting…"));
  stateLabel_ = new QLabel;
  networkLabel_ = new QLabel;
  networkLabel_->setObjectName(QStringLiteral("networkStatus"));
  statusBar()->addWidget(runLabel_, 1);
  statusBar()->addPermanentWidget(networkLabel_);
  statusBar()->addPermanentWidget(stateLabel_);

  connect(&engine_, &EngineControl::stepped, dashboard_, &Dashboard::addStep);
  connect(&engine_, &EngineControl::roundClosed, this, [this](const node::RoundSummary& s) {
    dashboard_->addRound(s);
    experts_->noteRound(s);
    model_->addRound(s);
  });
  connect(&engine_, &EngineControl::swarmChanged, this, [this](const node::SwarmView& v) {
    dashboard_->showSwarm(v);
    peers_->showSwarm(v);
    experts_->showSwarm(v);
    transfers_->showSwarm(v);
  });
  connect(&engine_, &EngineControl::message, log_, &LogView::append);
  connect(&engine_, &EngineControl::networkStatus, networkLabel_, &QLabel::setText);
  connect(&engine_, &EngineControl::failed, this, [this](const QString& error) {
    log_->append(tr("Error: %1").arg(error));
    dashboard_->setState(tr("Stopped by an error: %1").arg(error));
  });
  connect(&engine_, &EngineControl::finished, this, [this] {
    dashboard_->setState(tr("Stopped"));
    stateLabel_->setText(tr("Stopped"));
  });
  showDecision(donation_.paused(), donation_.reason());
}

void MainWindow::setRunInfo(const node::RunInfo& info) {
  dashboard_->setSyncEvery(info.syncEvery);
  runLabel_->setText(tr("Run \"%1\" · you are peer %2 · listening on %3 · device %4")
                         .arg(QString::fromStdString(info.runName), QString::fromStdString(info.selfId).left(8),
                              QString::fromStdString(info.listen), QString::fromStdString(info.device)));
  setWindowTitle(tr("ExpertSwarm — %1").arg(QString::fromStdString(info.runName)));
}

void MainWindow::showDecision(bool paused, const QString& reason) {
  const QString state = paused ? reason : tr("Training");
  dashboard_->setState(state);
  stateLabel_->setText(state);
  pauseAction_->setChecked(donation_.manualPause());
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (hidesToTray_ && !quitting_) {
    hide();
    event->ignore();
    return;
  }
  if (!quitting_) {
    // The window goes once the engine has finished the step, saved and left the swarm.
    quitting_ = true;
    engine_.quit();
  }
  event->accept();
}

}  // namespace es::ui
