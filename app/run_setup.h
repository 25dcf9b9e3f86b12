// What both headless modes do first: find the run, check the device, prepare the run's data in
// the data dir (tokenizer, token shards) and load it.
#pragma once

#include "app/command_line.h"
#include "core/train/corpus_prep.h"
#include "p2p/torrent_maker.h"

#include <QString>

#include <functional>
#include <memory>

namespace es::app {

struct PreparedRun {
  QString dataDir;
  QString sourceDir;  // the run folder it came from (bundled or --run)
  QString runDir;     // <data dir>/runs/<run id> (the v2 info-hash of run.json)
  std::unique_ptr<train::RunData> data;
  p2p::TorrentFile runTorrent;  // what the run id is the v2 info-hash of (no bytes: see runState)
  QString runState;             // a prepared run's copy in part: its resume file, what joinRun adds
  QString seedDir;              // where the run torrent's files are (its save path)
  int exitCode = 0;             // non-zero: setup failed and the message was printed
};

PreparedRun prepareRun(const CommandLine& cl, const QString& shareDir);

// The run torrent of the run in `sourceDir`: its run.json alone for a run of a text corpus (each
// peer prepares the data itself), the whole folder for a prepared run (create-run: the data
// travels with it). Its v2 info-hash is the run id.
// A copy of a prepared run fetched by magnet carries its fetch state (train::kPartialRunState): the
// torrent is that state's, not a hash of the folder (it lacks the shards assigned to others).
// A created run's folder (train::kCreatedRunTorrent) is hashed and checked against the torrent it
// was created with — once: with `runsDir` (the data dir's runs/), while the folder matches the stamp
// of every file's size and time in runs/<id>/seed.stamp the check is skipped; a check that ran and
// passed hands the stamp to keep to `checkedStamp` (prepareRun writes it once the folder exists).
Expected<p2p::TorrentFile> runTorrentOf(const QString& sourceDir, const train::RunManifest& manifest,
                                        const QString& runsDir = {}, QByteArray* checkedStamp = nullptr);

void info(const std::string& line);  // one line to stderr (and to the sink, if one is set)
// Where info() lines also go (the engine relays them to the GUI's log); set and cleared on the
// thread that calls info().
void setInfoSink(std::function<void(const std::string&)> sink);

}  // namespace es::app
