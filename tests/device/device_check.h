// A few lines of test harness for tests/device: these tests must build where only LibTorch, CMake
// and a compiler are (scripts/gpu-check on a GPU machine without Qt), so they cannot be Qt Test
// executables like every other test. Each case is a function that throws CheckFailed; main()
// runs them, prints PASS/FAIL lines like Qt Test's and exits 1 on a failure, or 77 (CTest's
// SKIP_RETURN_CODE) when the asked-for device is not on this machine.
#pragma once

#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace es::device_test {

struct CheckFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define ES_CHECK(condition, what)                                                                               \
  do {                                                                                                          \
    if (!(condition))                                                                                           \
      throw ::es::device_test::CheckFailed(std::string(#condition) + " (" + (what) + ") at " + __FILE__ + ":" + \
                                           std::to_string(__LINE__));                                           \
  } while (0)

using Case = std::pair<const char*, std::function<void()>>;

// A crash prints its stack before the process dies: on a lent GPU there may be no second run to
// look with a debugger (the executables export their symbols for the names: ENABLE_EXPORTS).
inline void printStackOnCrash() {
  void* warm[1];
  (void)::backtrace(warm, 1);  // loads libgcc now: the handler must not allocate
  struct sigaction action {};
  action.sa_flags = SA_RESETHAND;  // the signal's default action (the crash) follows the print
  action.sa_handler = [](int signal) {
    static const char kHeader[] = "CRASH  : stack at the signal:\n";
    (void)!::write(STDOUT_FILENO, kHeader, sizeof kHeader - 1);
    void* frames[64];
    ::backtrace_symbols_fd(frames, ::backtrace(frames, 64), STDOUT_FILENO);
    ::raise(signal);
  };
  for (int signal : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) ::sigaction(signal, &action, nullptr);
}

inline int runCases(const char* suite, const std::vector<Case>& cases) {
  printStackOnCrash();
  int failed = 0;
  for (const auto& [name, body] : cases) {
    try {
      body();
      std::printf("PASS   : %s::%s()\n", suite, name);
    } catch (const std::exception& e) {
      std::printf("FAIL!  : %s::%s() %s\n", suite, name, e.what());
      ++failed;
    }
    std::fflush(stdout);
  }
  std::printf("Totals: %d passed, %d failed\n", int(cases.size()) - failed, failed);
  return failed ? 1 : 0;
}

}  // namespace es::device_test
