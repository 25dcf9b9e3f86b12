// The model commands' command lines (issue 17): what a donor does with the merged model.
//   expertswarm export --out DIR              a Hugging Face folder (core/export/hf_export.h)
//   expertswarm sample --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--seed S]
//   expertswarm eval --text FILE              tokens, loss and perplexity of a text
// sample and eval also take --device (auto: a GPU when there is one).
// Each takes --run (default | a run folder | the run's magnet link) and --data-dir like training.
// Bad input: exit 2 with a message, as for the training command line.
#pragma once

#include "app/command_line.h"

#include <QString>
#include <QStringList>

#include <cstdint>

namespace es::app {

struct ModelCommand {
  QString verb;                             // export | sample | eval
  QString run = QStringLiteral("default");  // as CommandLine::run
  QString runMagnetHash;                    // the run id when run is a magnet link
  QString dataDir;
  QString out;      // export
  QString prompt;   // sample
  int tokens = 64;  // sample
  double temperature = 0.8;
  int topK = 40;
  std::uint64_t seed = 1;
  QString textFile;                         // eval
  QString device = QStringLiteral("auto");  // sample, eval: auto | cpu | cuda | cuda:N
};

struct ModelParseResult {
  std::optional<ModelCommand> command;
  int exitCode = 0;  // when no command: 0 after --help, 2 on bad input
  QString message;
};

// arguments[1] is one of the verbs.
bool isModelCommand(const QStringList& arguments);
ModelParseResult parseModelCommand(const QStringList& arguments);

}  // namespace es::app
