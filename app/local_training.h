// Headless training alone (--no-gui --local-only): prepare the run's data, resume the saved
// training state if any, train, print one progress line per log interval, save durably, and stop
// cleanly on SIGINT/SIGTERM (finish the step, save, exit 0). The swarm's node replaces this loop
// when it arrives; the trainer underneath stays the same.
#pragma once

#include "app/command_line.h"

namespace es::app {

// Returns the process exit code (0 ok, 1 runtime failure, 2 bad input such as an expert list that
// does not fit the run's model).
int runLocalTraining(const CommandLine& commandLine, const QString& shareDir);

}  // namespace es::app
