// expertswarm: parse the command line, pick the application object, wire the modules, run.
#include "app/command_line.h"
#include "app/local_training.h"

#include <QCoreApplication>
#include <QTextStream>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace {

// libgomp reads OMP_WAIT_POLICY once, when it is loaded (before main). Spin-waiting OpenMP
// threads made 2 threads slower than 1 on a shared 2-core machine (docs/PERFORMANCE.md), so the
// client re-executes itself once with the passive policy unless the user chose one.
void ensurePassiveOpenMpWaits(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);  // returns only on failure: then run with the default policy
}

}  // namespace

int main(int argc, char** argv) {
  ensurePassiveOpenMpWaits(argv);
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
  return es::app::runLocalTraining(*parsed.commandLine, shareDir);
}
