// Test helper: runs the built `expertswarm` binary and captures what it printed.
#pragma once

#include <QDir>
#include <QProcess>
#include <QtTest>

namespace es::test {

// The folder the client prepared its run in: runs/<run id> (keyed by the run id, which a test
// does not compute), the only folder under <dataDir>/runs; "<dataDir>/runs/(none)" before one exists.
inline QString runFolder(const QString& dataDir) {
  const QString runs = dataDir + QStringLiteral("/runs");
  const auto folders = QDir(runs).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
  return runs + QLatin1Char('/') + (folders.size() == 1 ? folders.first() : QStringLiteral("(none)"));
}

struct ClientRun {
  int exitCode = -1;
  QString out;
  QString err;
};

inline ClientRun runClient(const QStringList& arguments, int timeoutMs = 300000,
                           const QProcessEnvironment& environment = QProcessEnvironment::systemEnvironment()) {
  QProcess process;
  process.setProcessEnvironment(environment);
  process.start(QStringLiteral(ES_CLIENT_BINARY), arguments);
  ClientRun run;
  if (!process.waitForFinished(timeoutMs)) {
    process.kill();
    process.waitForFinished();
    run.err = QStringLiteral("timed out");
    return run;
  }
  run.exitCode = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
  run.out = QString::fromUtf8(process.readAllStandardOutput());
  run.err = QString::fromUtf8(process.readAllStandardError());
  return run;
}

}  // namespace es::test
