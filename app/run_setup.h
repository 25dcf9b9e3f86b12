// What both headless modes do first: find the run, check the device, prepare the run's data in
// the data dir (tokenizer, token shards) and load it.
#pragma once

#include "app/command_line.h"
#include "core/train/corpus_prep.h"

#include <QString>

#include <memory>

namespace es::app {

struct PreparedRun {
  QString dataDir;
  QString sourceDir;  // the run folder it came from (bundled or --run)
  QString runDir;     // <data dir>/runs/<name>
  std::unique_ptr<train::RunData> data;
  int exitCode = 0;   // non-zero: setup failed and the message was printed
};

PreparedRun prepareRun(const CommandLine& cl, const QString& shareDir);

void info(const std::string& line);  // one line to stderr

}  // namespace es::app
