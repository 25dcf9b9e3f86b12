// What the GUI sees of the engine: commands it may give and the reports it receives, as plain
// structs (core/node/node_reports.h). The app implements it over the real engine (which lives on
// the engine thread); GUI tests implement it with a fake that emits the signals by hand.
// No Torch, no libtorrent: ui/ only ever talks to this.
#pragma once

#include "core/node/node_metatypes.h"

#include <QObject>
#include <QString>

namespace es::ui {

class EngineControl : public QObject {
  Q_OBJECT

 public:
  using QObject::QObject;
  ~EngineControl() override = default;

  // Commands, called on the GUI thread; implementations forward them to the engine.
  virtual void setPaused(bool paused) = 0;  // pause/resume training (between two steps)
  virtual void finishRoundThenPause() = 0;  // pause once this round's contribution is out
  virtual void setRateLimits(int uploadBytesPerSecond, int downloadBytesPerSecond) = 0;  // 0 = none
  virtual void quit() = 0;  // finish the step, persist, leave; then finished()

 Q_SIGNALS:
  void started(const es::node::RunInfo& info);
  void stepped(const es::node::StepReport& report);
  void roundClosed(const es::node::RoundSummary& summary);
  void swarmChanged(const es::node::SwarmView& view);
  void pausedChanged(bool paused);
  void message(const QString& line);
  // Where this peer stands on the network, one line for the status bar: reachability (when
  // tested), external address once known, the address it listens on.
  void networkStatus(const QString& summary);
  void failed(const QString& error);
  void finished();
};

}  // namespace es::ui
