// Training quality on a GPU (issue 16: bf16 training gets as far as f32 on the CPU): 300 steps of
// the default run bring validation loss well below ln(vocab), as tests/tst_train_quality checks on
// the CPU (shared: tests/support/quality_run.h). Run as
//   tst_train_quality DEVICE RUN_SOURCE     (RUN_SOURCE: the bundled run, share/expertswarm/runs/sotu-text)
// by scripts/gpu-check. Exit 77 (skipped) when the device is not here.
#include "tests/device/device_check.h"
#include "tests/support/quality_run.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

using namespace es;

namespace {

std::string g_device, g_runSource;

void threeHundredStepsLowerValidationLossWellBelowLnVocab() {
  char pattern[] = "/tmp/es-train-quality-XXXXXX";
  ES_CHECK(::mkdtemp(pattern) != nullptr, "mkdtemp");
  struct Cleanup {
    std::filesystem::path p;
    ~Cleanup() { std::filesystem::remove_all(p); }
  } cleanup{pattern};
  const std::string runDir = cleanup.p.string() + "/run";
  auto prepared = train::prepareRunData(g_runSource, runDir, [](const std::string&) {});
  ES_CHECK(prepared.ok(), prepared.ok() ? "" : prepared.error());
  auto data = train::loadRunData(runDir);
  ES_CHECK(data.ok(), data.ok() ? "" : data.error());
  const auto run = test::trainDefaultRun(*data, g_device);
  ES_CHECK(run.error.empty(), run.error);
  ES_CHECK(std::abs(run.initial - run.lnVocab) < 0.2, std::to_string(run.initial));
  ES_CHECK(run.firstNonFiniteStep == 0, "a non-finite loss at step " + std::to_string(run.firstNonFiniteStep));
  ES_CHECK(run.final < test::qualityThreshold(test::kQualitySteps), std::to_string(run.final));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DEVICE RUN_SOURCE\n", argv[0]);
    return 2;
  }
  g_device = argv[1];
  g_runSource = argv[2];
  if (g_device != "cpu" && !train::checkDevice(g_device).ok()) {
    std::printf("SKIP   : no %s device here (%s)\n", g_device.c_str(), train::checkDevice(g_device).error().c_str());
    return 77;
  }
  return device_test::runCases("TrainQuality", {{"threeHundredStepsLowerValidationLossWellBelowLnVocab",
                                                 threeHundredStepsLowerValidationLossWellBelowLnVocab}});
}
