#include "app/gui_client.h"

#include "app/engine_bridge.h"
#include "app/network_setup.h"
#include "app/stop_signals.h"
#include "app/swarm_client.h"
#include "core/settings/client_settings.h"
#include "ui/desktop_app.h"
#include "ui/first_run_dialog.h"

#include <QApplication>
#include <QSettings>

#include <cstdio>

namespace es::app {

QString missingDisplay() {
  if (!qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") || !qEnvironmentVariableIsEmpty("DISPLAY") ||
      !qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY"))
    return {};
  return QStringLiteral(
      "no display to open the window on (DISPLAY and WAYLAND_DISPLAY are unset); "
      "run headless with --no-gui");
}

namespace {
// The donor's settings fill in what the command line leaves at its default; the command line wins.
void applySettings(CommandLine& cl, const settings::ClientSettings& s) {
  if (cl.device == QLatin1String("auto")) cl.device = s.device;
  if (cl.run == QLatin1String("default") && !runIdOfMagnet(s.runSource).isEmpty()) {  // chosen in the first-run dialog
    cl.run = s.runSource;
    cl.runMagnetHash = runIdOfMagnet(s.runSource);
  }
  if (cl.dataDir.isEmpty()) cl.dataDir = s.dataDir;
  cl.claimSize = s.claimSize;
  if (cl.hostMemoryCapMiB == 0) cl.hostMemoryCapMiB = s.hostMemoryCapMiB;
  if (cl.gpuMemoryCapMiB == 0) cl.gpuMemoryCapMiB = s.gpuMemoryCapMiB;
  if (cl.diskQuotaMiB == 0) cl.diskQuotaMiB = s.diskQuotaMiB;
  if (cl.dataBudgetBytes == 0) cl.dataBudgetBytes = std::int64_t(s.dataBudgetMiB) << 20;
  cl.uploadLimit = s.uploadLimitKiB * 1024;
  cl.downloadLimit = s.downloadLimitKiB * 1024;
}
}  // namespace

int runGuiClient(CommandLine cl, const QString& shareDir) {
  QSettings store;
  auto settings = settings::ClientSettings::load(store);
  const bool testing = !cl.uiSnapshot.isEmpty();
  if (!settings.firstRunDone && !testing) {
    if (settings.listenPort == 0) {  // chosen now, so the dialog can name the port peers will connect to
      settings.listenPort = settings::ClientSettings::randomListenPort();
      settings::ClientSettings::saveListenPort(store, settings.listenPort);
    }
    ui::FirstRunDialog dialog;
    dialog.setNetwork(true, settings.bootstrapNodes, settings.listenPort);
    if (dialog.exec() != QDialog::Accepted) return 0;
    settings.runSource = dialog.runSource();
    settings.publicNetwork = dialog.joinPublicNetwork();
    settings.firstRunDone = true;
    settings.save(store);
  }
  applySettings(cl, settings);
  applyNetworkSettings(cl, settings, &store);

  EngineBridge engine(cl, shareDir);
  ui::DesktopApp desktop(engine, store, QCoreApplication::applicationFilePath(), cl.uiSnapshot);
  int exitCode = 0;
  // The progress lines of the headless client go to stdout here too (scripts and tests read them).
  QObject::connect(&engine, &ui::EngineControl::roundClosed, [](const node::RoundSummary& s) { printRoundLine(s); });
  // Setup lines print themselves (run_setup's info()); the node's messages are printed here.
  bool setupDone = false;
  QObject::connect(&engine, &ui::EngineControl::started, [&setupDone] { setupDone = true; });
  QObject::connect(&engine, &ui::EngineControl::message, [&setupDone](const QString& line) {
    if (setupDone && !line.startsWith(QLatin1String("Ledger: ")))
      std::fprintf(stderr, "%s\n", line.toUtf8().constData());
  });
  QObject::connect(&engine, &EngineBridge::startFailed, [&exitCode, testing](int code) {
    exitCode = code;
    if (testing) QCoreApplication::exit(code);
  });
  QObject::connect(&engine, &ui::EngineControl::failed, [&exitCode, &setupDone, testing](const QString&) {
    exitCode = exitCode ? exitCode : 1;
    if (testing && !setupDone) QCoreApplication::exit(1);  // e.g. a magnet link whose peers never answered
  });
  StopSignals stop([&engine] { engine.quit(); });
  desktop.show();
  engine.start();
  const int loopCode = QApplication::exec();
  return loopCode ? loopCode : exitCode;
}

}  // namespace es::app
