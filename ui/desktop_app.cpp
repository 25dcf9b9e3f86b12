#include "ui/desktop_app.h"

#include "core/store/ledger.h"
#include "ui/autostart.h"
#include "ui/create_run_dialog.h"
#include "ui/dashboard.h"
#include "ui/donation_controller.h"
#include "ui/engine_control.h"
#include "ui/expert_map_widget.h"
#include "ui/idle_monitor.h"
#include "ui/log_view.h"
#include "ui/machine_sensors.h"
#include "ui/main_window.h"
#include "ui/model_view.h"
#include "ui/peer_map_widget.h"
#include "ui/peers_view.h"
#include "ui/settings_dialog.h"
#include "ui/tray_icon.h"

#include <QAction>
#include <QApplication>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMessageBox>
#include <QProcess>
#include <QSaveFile>
#include <QSettings>
#include <QSystemTrayIcon>
#include <QTabWidget>
#include <QTableWidget>

#include <cstdio>

namespace es::ui {

DesktopApp::DesktopApp(EngineControl& engine, QSettings& store, QString executable, QString snapshotDir,
                       QObject* parent)
    : QObject(parent),
      engine_(engine),
      store_(store),
      executable_(std::move(executable)),
      snapshotDir_(std::move(snapshotDir)),
      settings_(settings::ClientSettings::load(store)),
      idle_(std::make_unique<ScreenSaverIdleSource>()),
      sensors_(std::make_unique<SystemSensors>()),
      donation_(std::make_unique<DonationController>(engine, idle_.get(), sensors_.get())),
      window_(std::make_unique<MainWindow>(engine, *donation_)) {
  sensors_->setDevice(settings_.device);  // the device, like the engine's, is read at start
  donation_->applySettings(settings_);
  if (QSystemTrayIcon::isSystemTrayAvailable() && snapshotDir_.isEmpty()) {
    tray_ = std::make_unique<TrayIcon>(*donation_, engine, window_.get());
    window_->setHidesToTray(true);
  }
  connect(window_->settingsAction(), &QAction::triggered, this, &DesktopApp::openSettings);
  connect(window_->exportAction(), &QAction::triggered, this, &DesktopApp::chooseExportFolder);
  connect(window_->createRunAction(), &QAction::triggered, this, [this] {
    auto* dialog = new CreateRunDialog(executable_, window_.get());
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &CreateRunDialog::created, this, [this](const QString& folder, const QString& link) {
      window_->log()->append(tr("Created the run \"%1\"; others join it with %2").arg(folder, link));
    });
    dialog->show();
  });
  connect(window_->model(), &ModelView::exportRequested, this, &DesktopApp::chooseExportFolder);
  connect(&engine_, &EngineControl::started, this, [this](const node::RunInfo& info) {
    runInfo_ = info;
    window_->setRunInfo(info);
    if (const auto error = loadHistory(info); !error.isEmpty()) window_->log()->append(error);
  });
  connect(&engine_, &EngineControl::failed, this, [this](const QString& error) {
    if (snapshotDir_.isEmpty() && window_->isVisible()) QMessageBox::warning(window_.get(), tr("ExpertSwarm"), error);
  });
  connect(&engine_, &EngineControl::finished, this, [this] {
    if (!snapshotDir_.isEmpty()) {
      if (const auto error = writeSnapshot(snapshotDir_); !error.isEmpty()) {
        window_->log()->append(error);
        std::fprintf(stderr, "expertswarm: %s\n", error.toUtf8().constData());
        QCoreApplication::exit(1);
        return;
      }
    }
    QCoreApplication::quit();
  });
}

DesktopApp::~DesktopApp() = default;

void DesktopApp::show() {
  window_->show();
  if (tray_) tray_->show();
}

QString DesktopApp::loadHistory(const node::RunInfo& info) {
  auto reader = store::LedgerReader::open(info.ledgerPath);
  if (!reader) return tr("History not shown: %1").arg(QString::fromStdString(reader.error()));
  auto rows = (*reader)->metrics(info.runId);
  if (!rows) return tr("History not shown: %1").arg(QString::fromStdString(rows.error()));
  window_->dashboard()->loadHistory(*rows);
  if (!rows->empty())
    window_->log()->append(tr("Loaded %1 points of this run's history from the ledger").arg(rows->size()));
  auto samples = (*reader)->samples(info.runId);
  if (!samples) return tr("Model samples not shown: %1").arg(QString::fromStdString(samples.error()));
  window_->model()->loadHistory(*samples);
  return {};
}

void DesktopApp::chooseExportFolder() {
  if (runInfo_.runId.empty()) {
    window_->log()->append(tr("Export: the run has not started yet"));
    return;
  }
  const QString suggested = QDir::home().filePath(QString::fromStdString(runInfo_.runName) + QStringLiteral("-hf"));
  const QString dir = QFileDialog::getSaveFileName(window_.get(), tr("Export the merged model (a folder)"), suggested);
  if (!dir.isEmpty()) exportModel(dir);
}

bool DesktopApp::exportModel(const QString& dir) {
  if (runInfo_.runId.empty()) return false;
  auto* process = new QProcess(this);
  const QString dataDir = QFileInfo(QString::fromStdString(runInfo_.ledgerPath)).absolutePath();
  window_->log()->append(tr("Exporting the merged model to \"%1\"…").arg(dir));
  connect(process, &QProcess::finished, this, [this, process, dir](int code, QProcess::ExitStatus status) {
    const QString err = QString::fromUtf8(process->readAllStandardError()).trimmed();
    const QString last = err.section(QLatin1Char('\n'), -1);
    window_->log()->append(status == QProcess::NormalExit && code == 0
                               ? tr("Exported the merged model to \"%1\"").arg(dir)
                               : tr("Export failed: %1").arg(last.isEmpty() ? tr("exit code %1").arg(code) : last));
    process->deleteLater();
  });
  process->start(executable_, {QStringLiteral("export"), QStringLiteral("--out"), dir, QStringLiteral("--run"),
                               QStringLiteral("magnet:?xt=urn:btmh:1220") + QString::fromStdString(runInfo_.runId),
                               QStringLiteral("--data-dir"), dataDir});
  return true;
}

void DesktopApp::applySettings(const settings::ClientSettings& next) {
  const bool autostartChanged = next.startAtLogin != settings_.startAtLogin;
  settings_ = next;
  settings_.save(store_);
  store_.sync();
  donation_->applySettings(settings_);
  if (autostartChanged)
    if (const auto error = setStartAtLogin(settings_.startAtLogin, executable_); !error.isEmpty())
      window_->log()->append(tr("Start at login: %1").arg(error));
}

void DesktopApp::openSettings() {
  SettingsDialog dialog(settings_, window_.get());
  if (dialog.exec() == QDialog::Accepted) applySettings(dialog.settings());
}

QString DesktopApp::writeSnapshot(const QString& dir) {
  if (!QDir().mkpath(dir)) return tr("cannot create \"%1\"").arg(dir);
  // One image per main tab: what a user sees on each.
  const std::pair<int, const char*> tabs[] = {{0, "dashboard.png"}, {1, "peers.png"}, {2, "experts.png"}};
  for (const auto& [index, name] : tabs) {
    window_->tabs()->setCurrentIndex(index);
    QApplication::processEvents();
    if (!window_->grab().save(QDir(dir).filePath(QString::fromLatin1(name))))
      return tr("cannot write \"%1\"").arg(QDir(dir).filePath(QString::fromLatin1(name)));
  }
  window_->tabs()->setCurrentIndex(0);
  QJsonObject state;
  auto* dash = window_->dashboard();
  state["trainPoints"] = dash->trainPointCount();
  state["valPoints"] = dash->valPointCount();
  QJsonArray trainRounds, valRounds, peerIds, owners;
  for (auto r : dash->roundsWithTrainPoints()) trainRounds.append(qint64(r));
  for (auto r : dash->roundsWithValPoints()) valRounds.append(qint64(r));
  for (const auto& id : window_->peers()->map()->peerIds()) peerIds.append(id);
  for (int e = 0; e < window_->experts()->table()->columnCount(); ++e)
    owners.append(QJsonArray::fromStringList(window_->experts()->ownersOf(e)));
  state["roundsWithTrainPoints"] = trainRounds;
  state["roundsWithValPoints"] = valRounds;
  state["peerMapPeers"] = window_->peers()->map()->peerCount();
  state["peerIds"] = peerIds;
  state["expertOwners"] = owners;
  QSaveFile file(QDir(dir).filePath(QStringLiteral("ui-state.json")));
  if (!file.open(QIODevice::WriteOnly) || file.write(QJsonDocument(state).toJson()) < 0 || !file.commit())
    return tr("cannot write ui-state.json in \"%1\"").arg(dir);
  return {};
}

}  // namespace es::ui
