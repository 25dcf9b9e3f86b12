// expertswarm: parse the command line, pick the application object, wire the modules, run.
#include "app/command_line.h"
#include "app/local_training.h"
#include "app/swarm_client.h"
#include "core/common/openmp_policy.h"

#include <QCoreApplication>
#include <QTextStream>

int main(int argc, char** argv) {
  es::ensurePassiveOpenMpWaits(argv);
  QCoreApplication app(argc, argv);
  QCoreApplication::setApplicationName(QStringLiteral("expertswarm"));
  QCoreApplication::setOrganizationName(QStringLiteral("expertswarm"));
  QCoreApplication::setApplicationVersion(QStringLiteral(ES_VERSION));

  const auto parsed = es::app::parseCommandLine(QCoreApplication::arguments());
  if (!parsed.commandLine) {
    QTextStream(parsed.exitCode == 0 ? stdout : stderr) << parsed.message;
    return parsed.exitCode;
  }
  const QString shareDir = QCoreApplication::applicationDirPath() + QStringLiteral("/../share/expertswarm");
  const auto& cl = *parsed.commandLine;
  return cl.localOnly ? es::app::runLocalTraining(cl, shareDir) : es::app::runSwarmClient(cl, shareDir);
}
