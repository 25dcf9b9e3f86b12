// The main window: a dashboard (live loss, speed, round progress, traffic), the peer map, the
// expert map, transfers and the log, in tabs; the Training menu gives the donor's controls.
// It only shows what the engine reports and forwards the donor's commands to the
// DonationController (pause, snooze, finish the round) — it owns no engine state.
#pragma once

#include "core/node/node_reports.h"

#include <QMainWindow>

class QAction;
class QLabel;
class QTabWidget;

namespace es::ui {

class Dashboard;
class DonationController;
class EngineControl;
class ExpertMapWidget;
class LogView;
class ModelView;
class PeersView;
class TransfersView;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  MainWindow(EngineControl& engine, DonationController& donation, QWidget* parent = nullptr);

  void setRunInfo(const node::RunInfo& info);
  // Closing the window hides it to the tray when there is one; otherwise it quits the engine.
  void setHidesToTray(bool hides) { hidesToTray_ = hides; }

  Dashboard* dashboard() const { return dashboard_; }
  PeersView* peers() const { return peers_; }
  ExpertMapWidget* experts() const { return experts_; }
  TransfersView* transfers() const { return transfers_; }
  ModelView* model() const { return model_; }
  LogView* log() const { return log_; }
  QTabWidget* tabs() const { return tabs_; }
  QAction* settingsAction() const { return settingsAction_; }
  QAction* exportAction() const { return exportAction_; }        // File ▸ Export (also the Model tab's button)
  QAction* createRunAction() const { return createRunAction_; }  // a run of one's own (CreateRunDialog)
  QAction* pauseAction() const { return pauseAction_; }
  QAction* snoozeAction() const { return snoozeAction_; }
  QAction* finishRoundAction() const { return finishRoundAction_; }
  QAction* quitAction() const { return quitAction_; }
  QLabel* networkLabel() const { return networkLabel_; }  // reachability and addresses

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void showDecision(bool paused, const QString& reason);

  EngineControl& engine_;
  DonationController& donation_;
  Dashboard* dashboard_ = nullptr;
  PeersView* peers_ = nullptr;
  ExpertMapWidget* experts_ = nullptr;
  TransfersView* transfers_ = nullptr;
  ModelView* model_ = nullptr;
  LogView* log_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  QLabel* runLabel_ = nullptr;
  QLabel* stateLabel_ = nullptr;
  QLabel* networkLabel_ = nullptr;
  QAction* settingsAction_ = nullptr;
  QAction* exportAction_ = nullptr;
  QAction* createRunAction_ = nullptr;
  QAction* pauseAction_ = nullptr;
  QAction* snoozeAction_ = nullptr;
  QAction* finishRoundAction_ = nullptr;
  QAction* quitAction_ = nullptr;
  bool hidesToTray_ = false;
  bool quitting_ = false;
};

}  // namespace es::ui
