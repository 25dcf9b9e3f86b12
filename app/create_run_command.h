// `expertswarm create-run` (issue 40): a run of one's own from a text corpus.
//   expertswarm create-run --out DIR [--preset tiny|default|gpu-1b] [--name NAME] [--seed N]
//                          [--val-fraction F] [--shard-tokens N] [--sync-every N]
//                          [--experts-per-peer N] CORPUS...
// CORPUS: .txt / .jsonl files and folders of them. Progress goes to stderr; the last lines say
// where the run is and its magnet link, and how to host it (`expertswarm --run DIR`).
// Bad input: exit 2 with a message, nothing created; a failure while creating: exit 1, nothing
// left that looks like a run (core/train/run_create.h).
#pragma once

#include <QString>
#include <QStringList>

namespace es::app {

bool isCreateRunCommand(const QStringList& arguments);
int runCreateRunCommand(const QStringList& arguments, const QString& shareDir);

}  // namespace es::app
