// expertswarm: parse the command line, pick the application object (QApplication for the window,
// QCoreApplication headless — chosen at run time), wire the modules, run.
#include "app/command_line.h"
#include "app/create_run_command.h"
#include "app/gui_client.h"
#include "app/local_training.h"
#include "app/model_commands.h"
#include "app/swarm_client.h"
#include "core/common/openmp_policy.h"
#include "p2p/swarm_session.h"

#include <QApplication>
#include <QCoreApplication>
#include <QTextStream>

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace {

// Everything of ours is saved and closed by now; a libtorrent network thread that would not close
// (p2p::SwarmSession::abandonedNetworkThread) must not see static destruction.
int leave(int code) {
  if (!es::p2p::SwarmSession::abandonedNetworkThread()) return code;
  std::fflush(nullptr);
  std::_Exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  es::ensurePassiveOpenMpWaits(argv);
  QCoreApplication::setApplicationName(QStringLiteral("expertswarm"));
  QCoreApplication::setOrganizationName(QStringLiteral("expertswarm"));
  QCoreApplication::setApplicationVersion(QStringLiteral(ES_VERSION));

  // The window needs a QApplication, made before parsing (the parser needs an application
  // object); headless runs, --help and --version never touch a display.
  bool wantsWindow = true;
  for (int i = 1; i < argc; ++i) {
    const QByteArray arg(argv[i]);
    if ((i == 1 && (arg == "export" || arg == "sample" || arg == "eval" || arg == "create-run")) || arg == "--no-gui" ||
        arg == "-no-gui" || arg == "--help" || arg == "-help" || arg == "-h" || arg == "--version" || arg == "-version")
      wantsWindow = false;
  }
  std::unique_ptr<QCoreApplication> app;
  if (wantsWindow && es::app::missingDisplay().isEmpty())
    app = std::make_unique<QApplication>(argc, argv);
  else
    app = std::make_unique<QCoreApplication>(argc, argv);

  const QString shareDir = QCoreApplication::applicationDirPath() + QStringLiteral("/../share/expertswarm");
  if (es::app::isCreateRunCommand(QCoreApplication::arguments()))
    return es::app::runCreateRunCommand(QCoreApplication::arguments(), shareDir);
  if (es::app::isModelCommand(QCoreApplication::arguments())) {
    const auto model = es::app::parseModelCommand(QCoreApplication::arguments());
    if (!model.command) {
      QTextStream(model.exitCode == 0 ? stdout : stderr) << model.message;
      return model.exitCode;
    }
    return es::app::runModelCommand(*model.command, shareDir);
  }
  const auto parsed = es::app::parseCommandLine(QCoreApplication::arguments());
  if (!parsed.commandLine) {
    QTextStream(parsed.exitCode == 0 ? stdout : stderr) << parsed.message;
    return parsed.exitCode;
  }
  const auto& cl = *parsed.commandLine;
  if (!cl.noGui) {
    if (!qobject_cast<QApplication*>(app.get())) {
      QTextStream(stderr) << "expertswarm: " << es::app::missingDisplay() << "\n";
      return 2;
    }
    QApplication::setQuitOnLastWindowClosed(false);  // the engine decides when to quit
    return leave(es::app::runGuiClient(cl, shareDir));
  }
  return leave(cl.localOnly ? es::app::runLocalTraining(cl, shareDir) : es::app::runSwarmClient(cl, shareDir));
}
