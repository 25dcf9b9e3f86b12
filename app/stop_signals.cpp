#include "app/stop_signals.h"

#include <atomic>
#include <csignal>

namespace es::app {
namespace {
std::atomic<bool> g_stop{false};
void requestStop(int) { g_stop.store(true); }
}  // namespace

StopSignals::StopSignals(std::function<void()> onStop) : onStop_(std::move(onStop)) {
  struct sigaction action {};
  action.sa_handler = requestStop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  QObject::connect(&poll_, &QTimer::timeout, [this] {
    if (g_stop.exchange(false) && onStop_) onStop_();
  });
  poll_.start(100);
}

StopSignals::~StopSignals() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

}  // namespace es::app
