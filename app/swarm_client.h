// Headless swarm training (`expertswarm --no-gui`): runs the engine on the main thread and prints
// one progress line per round (and a live bar on a terminal).
#pragma once

#include "app/command_line.h"
#include "app/engine.h"

#include <QString>

namespace es::app {

int runSwarmClient(const CommandLine& commandLine, const QString& shareDir);
// The progress line (stdout) and the closing summary (stderr), shared with the GUI client.
void printRoundLine(const node::RoundSummary& summary);
void printSummary(const EngineSummary& summary);

}  // namespace es::app
