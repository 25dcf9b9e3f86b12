#include "app/run_setup.h"
#include "app/data_dir.h"

#include "core/train/prepared_run.h"
#include "core/train/trainer.h"
#include "p2p/run_torrent_file.h"
#include "p2p/torrent_maker.h"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>

#include <algorithm>
#include <cstdio>
#include <filesystem>
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

// What a prepared run's folder was at its last full check: the run id, then each file (hidden ones
// aside: the folder must hold exactly what its run.json lists, checked before) with its size and
// modification time in nanoseconds, in path order. Hashing a folder of GiBs at every start costs
// seconds to minutes; like qBittorrent's fast resume, an unchanged stamp skips it (a file rewritten
// gets a new time). Bit rot that keeps the time is libtorrent's to find: in seed mode it hashes a
// piece the first time it serves it, and rechecks the torrent on a mismatch.
QByteArray folderStamp(const QString& dir, const std::string& runId) {
  QStringList lines{QString::fromStdString(runId)};
  QDirIterator it(dir, QDir::Files, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    const QString path = it.next();
    std::error_code ec;
    const auto time = std::filesystem::last_write_time(path.toStdString(), ec);
    lines << QStringLiteral("%1 %2 %3")
                 .arg(QDir(dir).relativeFilePath(path))
                 .arg(it.fileInfo().size())
                 .arg(ec ? -1 : qint64(time.time_since_epoch().count()));
  }
  std::sort(lines.begin() + 1, lines.end());
  return lines.join(QLatin1Char('\n')).toUtf8() + '\n';
}

// The stamp of a check that passed, in the run folder (nothing when none ran); failing to write it
// only costs the next start a full check.
void keepStamp(const QString& runDir, const QByteArray& stamp) {
  if (stamp.isEmpty()) return;
  QSaveFile out(runDir + QStringLiteral("/seed.stamp"));
  if (out.open(QIODevice::WriteOnly) && out.write(stamp) == stamp.size()) out.commit();
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
  const QString runsDir = out.dataDir + QStringLiteral("/runs");
  QByteArray checkedStamp;  // a created run's folder, hashed and found whole: its stamp to keep
  auto torrent = runTorrentOf(out.sourceDir, *manifest, runsDir, &checkedStamp);
  if (!torrent) return fail(1, torrent.error());
  out.runTorrent = std::move(*torrent);
  out.runDir = runsDir + QLatin1Char('/') + QString::fromStdString(out.runTorrent.infoHashV2);
  adoptNamedRunFolder(out.sourceDir, runsDir, manifest->name, out.runDir);
  if (!QDir().mkpath(out.runDir + QStringLiteral("/state")))
    return fail(1, "cannot create \"" + out.runDir.toStdString() + "/state\"");
  keepStamp(out.runDir, checkedStamp);  // after the adoption above: written first, it made runs/<id>
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

Expected<p2p::TorrentFile> runTorrentOf(const QString& sourceDir, const train::RunManifest& manifest,
                                        const QString& runsDir, QByteArray* checkedStamp) {
  const QString runState = sourceDir + QLatin1Char('/') + QLatin1String(train::kPartialRunState);
  if (manifest.data.prepared() && QFileInfo::exists(runState)) {
    auto state = p2p::loadRunTorrent(runState.toStdString());
    if (!state) return makeError(state.error());
    if (state->torrent.name != QDir(sourceDir).dirName().toStdString())
      return makeError("\"" + runState.toStdString() + "\" is the state of another run folder");
    return state->torrent;
  }
  if (manifest.data.prepared()) {
    const QString created = sourceDir + QLatin1Char('/') + QLatin1String(train::kCreatedRunTorrent);
    if (!QFileInfo::exists(created)) return p2p::makeTorrent(QDir(sourceDir).absolutePath().toStdString());
    auto original = p2p::loadTorrent(created.toStdString());
    if (!original) return makeError(original.error());
    const QString stampFile =
        runsDir.isEmpty()
            ? QString()
            : runsDir + QLatin1Char('/') + QString::fromStdString(original->infoHashV2) + QStringLiteral("/seed.stamp");
    const QByteArray stamp = folderStamp(sourceDir, original->infoHashV2);
    if (!stampFile.isEmpty() && fileBytes(stampFile) == stamp) {
      info("The run folder is as it was at its last full check (every file's size and time): not hashed again");
      return original;
    }
    auto made = p2p::makeTorrent(QDir(sourceDir).absolutePath().toStdString());  // stamped before: a
    if (!made) return made;  // file that changes while it is hashed no longer matches the stamp
    if (original->infoHashV2 != made->infoHashV2)
      return makeError("\"" + p2p::firstDifferingFile(*original, *made) + "\" in \"" + sourceDir.toStdString() +
                       "\" is not the file the run was created with (its bytes changed since; " +
                       train::kCreatedRunTorrent +
                       " keeps the original's hashes): restore it, or create the run again");
    if (checkedStamp) *checkedStamp = stamp;  // kept once the run folder is in place (prepareRun)
    return made;
  }
  return p2p::makeTorrent((sourceDir + QStringLiteral("/run.json")).toStdString());
}

}  // namespace es::app
