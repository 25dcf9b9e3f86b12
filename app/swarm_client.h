// Headless swarm training (`expertswarm --no-gui`): wires the run, the identity, the libtorrent
// swarm and the node together and prints one progress line per round.
#pragma once

#include "app/command_line.h"

#include <QString>

namespace es::app {

int runSwarmClient(const CommandLine& commandLine, const QString& shareDir);

}  // namespace es::app
