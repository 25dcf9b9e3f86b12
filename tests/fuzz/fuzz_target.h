// One fuzz target = one function `bool esFuzzAccepts_<name>(data, size)` that feeds the bytes to
// the real parser and says whether it accepted them. Built for libFuzzer (scripts/fuzz) it is also
// LLVMFuzzerTestOneInput; built with -DES_FUZZ_REPLAY (tst_fuzz_corpus, the normal compiler) only
// the named function exists, so all targets link into one test that replays the corpora.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#ifdef ES_FUZZ_REPLAY
#define ES_FUZZ_TARGET(name) bool esFuzzAccepts_##name(const std::uint8_t* data, std::size_t size)
#else
#define ES_FUZZ_TARGET(name)                                                          \
  bool esFuzzAccepts_##name(const std::uint8_t* data, std::size_t size);              \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { \
    esFuzzAccepts_##name(data, size);                                                 \
    return 0;                                                                         \
  }                                                                                   \
  bool esFuzzAccepts_##name(const std::uint8_t* data, std::size_t size)
#endif

// A parser that accepted bytes must hand back a result that holds its own invariants; a broken
// one is a bug the fuzzer should see as a crash, in the replay test too.
#define ES_FUZZ_CHECK(condition)        \
  do {                                  \
    if (!(condition)) __builtin_trap(); \
  } while (false)

inline std::string_view fuzzBytes(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}
