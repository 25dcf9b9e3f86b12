// The GUI's EngineControl over the real engine: the engine lives on its own thread
// (docs/ARCHITECTURE.md, "Threads"), commands are queued to it, its signals arrive here queued
// (plain structs only). The
// engine is created, started and destroyed on that thread — the libtorrent session and the node's
// timers must live and die where they were made.
#pragma once

#include "app/command_line.h"
#include "ui/engine_control.h"

#include <QThread>

namespace es::app {

class Engine;

class EngineBridge : public ui::EngineControl {
  Q_OBJECT

 public:
  EngineBridge(CommandLine commandLine, QString shareDir, QObject* parent = nullptr);
  ~EngineBridge() override;  // stops the engine (if still running) and joins its thread

  void start();  // started(), or failed() then startFailed(exit code)

  void setPaused(bool paused) override;
  void finishRoundThenPause() override;
  void setRateLimits(int uploadBytesPerSecond, int downloadBytesPerSecond) override;
  void quit() override;

 Q_SIGNALS:
  void startFailed(int exitCode);  // 1 runtime, 2 bad input

 private:
  QThread thread_;
  Engine* engine_ = nullptr;  // owned; lives on thread_
  bool quitting_ = false;
};

}  // namespace es::app
