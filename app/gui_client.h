// The desktop client (`expertswarm` without --no-gui): the same engine as headless, on its own
// thread, under the main window, the tray icon and the donor's settings.
#pragma once

#include "app/command_line.h"

#include <QString>

namespace es::app {

// Empty when a window can be opened here; otherwise why not (for a clear message).
QString missingDisplay();
// Runs the event loop of an existing QApplication; returns the exit code.
int runGuiClient(CommandLine commandLine, const QString& shareDir);

}  // namespace es::app
