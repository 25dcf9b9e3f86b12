// Test helper: wait for a condition with a deadline while the event loop runs (never a fixed
// sleep that hopes), and small statistics for what tests report.
#pragma once

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QtTest>

#include <algorithm>
#include <functional>
#include <vector>

namespace es::test {

// Processes events until `done()` or the deadline; true when done.
inline bool waitUntil(const std::function<bool()>& done, int timeoutMs) {
  QElapsedTimer timer;
  timer.start();
  while (!done()) {
    if (timer.elapsed() > timeoutMs) return false;
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    QTest::qWait(5);
  }
  return true;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace es::test
