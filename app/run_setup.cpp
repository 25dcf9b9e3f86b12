#include "app/run_setup.h"
#include "app/data_dir.h"

#include "core/train/prepared_run.h"
#include "core/train/trainer.h"
#include "p2p/run_torrent_file.h"
#include "p2p/torrent_maker.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>

#include <cstdio>
#include <functional>

namespace es::app {

namespace {

std::function<void(const std::string&)> g_infoSink;

QByteArray fileBytes(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

// Runs prepared before the folder was keyed by run id live in runs/<name>. One whose copy of
// run.json is this manifest byte for byte is this very run: it is moved, so its progress is kept.
// (The name passed isValidRunName, so runs/<name> is one folder inside runs/.)
void adoptNamedRunFolder(const QString& sourceDir, const QString& runsDir, const std::string& name,
                         const QString& runDir) {
  const QString old = runsDir + QLatin1Char('/') + QString::fromStdString(name);
  if (old == runDir || QFileInfo::exists(runDir) || !QFileInfo::exists(old + QStringLiteral("/run.json"))) return;
  const QByteArray manifest = fileBytes(sourceDir + QStringLiteral("/run.json"));
  if (manifest.isEmpty() || fileBytes(old + QStringLiteral("/run.json")) != manifest) return;
  if (QDir().rename(old, runDir))
    info("Moved the run folder \"" + old.toStdString() + "\" to \"" + runDir.toStdString() +
         "\" (run folders are keyed by run id)");
}

}  // namespace

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
  out.dataDir = dataDirFor(cl.dataDir, info);
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
  // The data before anything is created: a stranger's manifest may name files outside its folder,
  // and a prepared folder's files must be the ones its run.json lists.
  const QString bundledCorpus = shareDir + QStringLiteral("/runs/sotu-text/corpus");
  const auto sourceText = out.sourceDir.toStdString();
  const QString runState = out.sourceDir + QLatin1Char('/') + QLatin1String(train::kPartialRunState);
  const bool partial = manifest->data.prepared() && QFileInfo::exists(runState);
  if (auto files = manifest->data.prepared()
                       ? train::checkPreparedFiles(*manifest, sourceText, partial)
                       : train::checkCorpusFiles(*manifest, sourceText, bundledCorpus.toStdString());
      !files)
    return fail(2, files.error());
  if (partial) out.runState = runState;
  // Keyed by the run id (the v2 info-hash of the run torrent, as the swarm computes it), never by
  // the manifest's name: two runs with one name cannot share a folder, and the path is 64 hex
  // digits inside runs/ whatever the manifest says.
  auto torrent = runTorrentOf(out.sourceDir, *manifest);
  if (!torrent) return fail(1, torrent.error());
  out.runTorrent = std::move(*torrent);
  const QString runsDir = out.dataDir + QStringLiteral("/runs");
  out.runDir = runsDir + QLatin1Char('/') + QString::fromStdString(out.runTorrent.infoHashV2);
  adoptNamedRunFolder(out.sourceDir, runsDir, manifest->name, out.runDir);
  if (!QDir().mkpath(out.runDir + QStringLiteral("/state")))
    return fail(1, "cannot create \"" + out.runDir.toStdString() + "/state\"");
  if (auto prepared = manifest->data.prepared() ? train::linkPreparedRun(sourceText, out.runDir.toStdString())
                                                : train::prepareRunData(sourceText, out.runDir.toStdString(), info,
                                                                        bundledCorpus.toStdString());
      !prepared)
    return fail(1, "preparing the run failed: " + prepared.error());
  out.seedDir = manifest->data.prepared() ? QFileInfo(QDir(out.sourceDir).absolutePath()).absolutePath() : out.runDir;
  auto data = train::loadRunData(out.runDir.toStdString());
  if (!data) return fail(1, data.error());
  out.data = std::make_unique<train::RunData>(std::move(*data));
  return out;
}

Expected<p2p::TorrentFile> runTorrentOf(const QString& sourceDir, const train::RunManifest& manifest) {
  const QString runState = sourceDir + QLatin1Char('/') + QLatin1String(train::kPartialRunState);
  if (manifest.data.prepared() && QFileInfo::exists(runState)) {
    auto state = p2p::loadRunTorrent(runState.toStdString());
    if (!state) return makeError(state.error());
    if (state->torrent.name != QDir(sourceDir).dirName().toStdString())
      return makeError("\"" + runState.toStdString() + "\" is the state of another run folder");
    return state->torrent;
  }
  if (manifest.data.prepared()) {
    auto made = p2p::makeTorrent(QDir(sourceDir).absolutePath().toStdString());
    const QString created = sourceDir + QLatin1Char('/') + QLatin1String(train::kCreatedRunTorrent);
    if (!made || !QFileInfo::exists(created)) return made;
    auto original = p2p::loadTorrent(created.toStdString());
    if (!original) return makeError(original.error());
    if (original->infoHashV2 != made->infoHashV2)
      return makeError("\"" + p2p::firstDifferingFile(*original, *made) + "\" in \"" + sourceDir.toStdString() +
                       "\" is not the file the run was created with (its bytes changed since; " +
                       train::kCreatedRunTorrent +
                       " keeps the original's hashes): restore it, or create the run again");
    return made;
  }
  return p2p::makeTorrent((sourceDir + QStringLiteral("/run.json")).toStdString());
}

}  // namespace es::app
