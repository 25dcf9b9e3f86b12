#include "app/run_setup.h"

#include "core/train/trainer.h"

#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>

#include <cstdio>
#include <functional>

namespace es::app {

namespace {
std::function<void(const std::string&)> g_infoSink;
}

void info(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  if (g_infoSink) g_infoSink(line);
}

void setInfoSink(std::function<void(const std::string&)> sink) { g_infoSink = std::move(sink); }

PreparedRun prepareRun(const CommandLine& cl, const QString& shareDir) {
  PreparedRun out;
  auto fail = [&](int code, const std::string& message) {
    info("expertswarm: " + message);
    out.exitCode = code;
    return std::move(out);
  };
  out.dataDir = cl.dataDir.isEmpty() ? QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) : cl.dataDir;
  out.sourceDir = cl.run == QLatin1String("default") ? shareDir + QStringLiteral("/runs/default") : cl.run;
  if (!QFileInfo::exists(out.sourceDir + QStringLiteral("/run.json")))
    return fail(2, "no run.json in \"" + out.sourceDir.toStdString() + "\"");
  auto manifest = train::loadRunManifest((out.sourceDir + QStringLiteral("/run.json")).toStdString());
  if (!manifest) return fail(2, manifest.error());
  // Checked before anything is created: bad input leaves no trace.
  for (int e : cl.experts)
    if (e >= manifest->model.nExperts)
      return fail(2, "--experts: expert " + std::to_string(e) + " does not exist; run \"" + manifest->name +
                         "\" has experts 0.." + std::to_string(manifest->model.nExperts - 1));
  if (auto usable = train::checkDevice(cl.device.toStdString()); !usable) return fail(2, "--device: " + usable.error());
  out.runDir = out.dataDir + QStringLiteral("/runs/") + QString::fromStdString(manifest->name);
  if (!QDir().mkpath(out.runDir + QStringLiteral("/state")))
    return fail(1, "cannot create \"" + out.runDir.toStdString() + "/state\"");
  if (auto prepared = train::prepareRunData(out.sourceDir.toStdString(), out.runDir.toStdString(), info); !prepared)
    return fail(1, "preparing the run failed: " + prepared.error());
  auto data = train::loadRunData(out.runDir.toStdString());
  if (!data) return fail(1, data.error());
  out.data = std::make_unique<train::RunData>(std::move(*data));
  return out;
}

}  // namespace es::app
