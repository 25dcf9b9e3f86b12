// The desktop application around one engine: the main window, the tray icon, the donor's
// settings (QSettings through ClientSettings) and the donation policy, the loss history from the
// ledger (read-only), and — for tests and the README — a snapshot of the window on finish.
#pragma once

#include "core/node/node_reports.h"
#include "core/settings/client_settings.h"

#include <QObject>
#include <QString>

#include <memory>

class QSettings;

namespace es::ui {

class DonationController;
class EngineControl;
class IdleSource;
class SystemSensors;
class MainWindow;
class TrayIcon;

class DesktopApp : public QObject {
  Q_OBJECT

 public:
  // `executable` is what a login autostart entry runs. With `snapshotDir`, the app writes
  // window images and ui-state.json there when the engine finishes, then quits (tests).
  DesktopApp(EngineControl& engine, QSettings& store, QString executable, QString snapshotDir = {},
             QObject* parent = nullptr);
  ~DesktopApp() override;

  void show();
  MainWindow* window() const { return window_.get(); }
  DonationController* donation() const { return donation_.get(); }
  const settings::ClientSettings& settings() const { return settings_; }
  void applySettings(const settings::ClientSettings& settings);  // saves, applies, updates autostart
  // Loads the run's loss history from the ledger at `ledgerPath` (read-only). "" or the reason.
  QString loadHistory(const node::RunInfo& info);
  // Writes the newest merged model as a Hugging Face folder at `dir` with `expertswarm export` in
  // a child process; its outcome goes to the log. False when no run has started yet.
  bool exportModel(const QString& dir);
  // Writes dashboard.png, peers.png, experts.png and ui-state.json into `dir`. "" or the reason.
  QString writeSnapshot(const QString& dir);

 private:
  void openSettings();
  void chooseExportFolder();

  EngineControl& engine_;
  QSettings& store_;
  QString executable_, snapshotDir_;
  settings::ClientSettings settings_;
  node::RunInfo runInfo_;
  std::unique_ptr<IdleSource> idle_;
  std::unique_ptr<SystemSensors> sensors_;
  std::unique_ptr<DonationController> donation_;
  std::unique_ptr<MainWindow> window_;
  std::unique_ptr<TrayIcon> tray_;
};

}  // namespace es::ui
