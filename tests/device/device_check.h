// A few lines of test harness for tests/device: these tests must build where only LibTorch, CMake
// and a compiler are (scripts/gpu-check on a GPU machine without Qt), so they cannot be Qt Test
// executables like every other test. Each case is a function that throws CheckFailed; main()
// runs them, prints PASS/FAIL lines like Qt Test's and exits 1 on a failure, or 77 (CTest's
// SKIP_RETURN_CODE) when the asked-for device is not on this machine.
#pragma once

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

inline int runCases(const char* suite, const std::vector<Case>& cases) {
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
