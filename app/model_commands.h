// Running the model commands (model_command_line.h): find the run's folder in the data dir, load
// its newest merged state and tokenizer, then export, sample or evaluate. Reads only: nothing
// of the run is changed (export writes only its --out folder).
#pragma once

#include "app/model_command_line.h"

namespace es::app {

// The exit code: 0 done, 1 failed (message printed), 2 bad input.
int runModelCommand(const ModelCommand& command, const QString& shareDir);

}  // namespace es::app
