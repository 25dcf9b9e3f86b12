// SIGINT/SIGTERM as a polite request: the handler only sets a flag; a timer on the calling thread
// turns it into `onStop()` (finish the step, persist, leave the swarm). A second signal while
// stopping is ignored the same way: the stop already under way finishes.
#pragma once

#include <QTimer>

#include <functional>

namespace es::app {

class StopSignals {
 public:
  explicit StopSignals(std::function<void()> onStop);
  ~StopSignals();

 private:
  std::function<void()> onStop_;
  QTimer poll_;
};

}  // namespace es::app
