// A stand-in for the engine in GUI tests: records the commands the GUI gives and lets the test
// emit the engine's signals by hand (the real engine is exercised end to end in tst_gui_swarm).
#pragma once

#include "ui/engine_control.h"

#include <utility>
#include <vector>

namespace es::test {

class FakeEngine : public ui::EngineControl {
 public:
  using ui::EngineControl::EngineControl;

  void setPaused(bool paused) override { pauseCalls.push_back(paused); }
  void finishRoundThenPause() override { ++finishRoundCalls; }
  void setRateLimits(int up, int down) override { rateLimitCalls.emplace_back(up, down); }
  void quit() override { ++quitCalls; }

  std::vector<bool> pauseCalls;
  int finishRoundCalls = 0;
  std::vector<std::pair<int, int>> rateLimitCalls;
  int quitCalls = 0;
};

}  // namespace es::test
