// Where a training step's time goes on a device (issue 16: MFU), through LibTorch's own profiler
// (Kineto; CUPTI on a GPU), so a lent GPU's few minutes bring back what to change next:
//   gpu_profile [--device DEVICE] [--model default|gpu-1b] [--dispatch auto|loop|batched|grouped] [--steps N]
//               [--run-dir DIR]
// Prints `name: value unit` lines: the step's wall time, the device's busy time in it (the sum of
// its kernels' and copies' durations — busy well under wall means the host, not the GPU, sets
// the pace), kernels and host-side operators per step, on a GPU the copies back to the host and
// the host's synchronizations per step (each a wait for the queue to drain), then the kernels that
// took the most time.
// On the CPU (no CUDA activity) only the operator counts are meaningful. Torch-only build, 2.4+.
#include "bench/throughput_child.h"
#include "bench/throughput_util.h"
#include "core/train/corpus_prep.h"
#include "core/train/trainer.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

struct Args {
  std::string device = "cuda", model = "gpu-1b", dispatch = "auto", runDir = "/tmp/expertswarm-bench-run";
  int steps = 5;
};

bool parseArgs(int argc, char** argv, Args& a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--device")
      a.device = value;
    else if (flag == "--model")
      a.model = value;
    else if (flag == "--dispatch")
      a.dispatch = value;
    else if (flag == "--run-dir")
      a.runDir = value;
    else if (flag == "--steps")
      a.steps = std::atoi(value.c_str());
    else
      return false;
  }
  return argc % 2 == 1 && a.steps > 0;
}

struct Totals {
  double ns = 0;
  long count = 0;
};

// The host's operators by calls a step (nested calls counted too: aten::linear and its aten::mm):
// where a launch-bound step's host time goes.
void printTopHostOps(const std::map<std::string, long>& calls, int steps) {
  std::vector<std::pair<std::string, long>> sorted(calls.begin(), calls.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (std::size_t i = 0; i < sorted.size() && i < 15; ++i)
    std::printf("host op %2zu: %5ld/step  %.110s\n", i + 1, sorted[i].second / steps, sorted[i].first.c_str());
}

void printTopKernels(const std::map<std::string, Totals>& kernels, double busyNs, int steps) {
  std::vector<std::pair<std::string, Totals>> sorted(kernels.begin(), kernels.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  for (std::size_t i = 0; i < sorted.size() && i < 20; ++i) {
    const auto& [name, t] = sorted[i];
    std::printf("kernel %2zu: %5.1f %% %8.2f ms/step %5ld/step  %.110s\n", i + 1, 100 * t.ns / busyNs,
                t.ns / 1e6 / steps, t.count / steps, name.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parseArgs(argc, argv, args)) {
    std::fprintf(stderr,
                 "usage: %s [--device D] [--model default|gpu-1b] [--dispatch auto|loop|batched|grouped] [--steps N] "
                 "[--run-dir DIR]\n",
                 argv[0]);
    return 2;
  }
  auto log = [](const std::string& line) { std::fprintf(stderr, "gpu_profile: %s\n", line.c_str()); };
  if (auto s = es::train::prepareRunData(ES_SHARE_DIR "/runs/sotu-text", args.runDir, log); !s)
    return log(s.error()), 1;
  auto trainer = es::bench::makeBenchTrainer({args.runDir, {}, 0, args.steps, args.device, args.model, args.dispatch});
  if (!trainer) return log(trainer.error()), 1;
  const bool gpu = args.device != "cpu";
  const auto sync = [&] {
    if (gpu) torch::cuda::synchronize();
  };
  for (int i = 0; i < 3; ++i) (*trainer)->trainStep();  // warm-up: allocator, cuBLAS handles, autotuning
  sync();

  std::set<ActivityType> activities{ActivityType::CPU};
  if (gpu) activities.insert(ActivityType::CUDA);
  const ProfilerConfig config(ProfilerState::KINETO);
  kineto::prepareProfiler(config, activities);
  kineto::enableProfiler(config, activities);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < args.steps; ++i) (*trainer)->trainStep();
  sync();
  const double wallNs = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  const auto result = kineto::disableProfiler();

  std::map<std::string, Totals> kernels;
  double busyNs = 0;
  long hostOps = 0, deviceEvents = 0, readsBack = 0, hostWaits = 0;
  std::map<std::string, long> hostCalls;
  for (const auto& e : result->events()) {
    if (e.deviceType() == c10::DeviceType::CPU) {
      ++hostOps;
      ++hostCalls[e.name()];
      // The CUDA runtime's calls are host-side events: each synchronize is the host waiting.
      // (Written for the next lent GPU: what Kineto names them there is not yet seen.)
      hostWaits += e.name().find("Synchronize") != std::string::npos;
      continue;
    }
    // Every value the host reads from the device (.item(), a count, a norm) is one such copy.
    readsBack += e.name().rfind("Memcpy DtoH", 0) == 0;
    auto& t = kernels[e.name()];
    t.ns += double(e.durationNs());
    ++t.count;
    busyNs += double(e.durationNs());
    ++deviceEvents;
  }
  const int n = args.steps;
  std::printf("model: %s\ndevice: %s\nexpert_dispatch: %s\n", args.model.c_str(), args.device.c_str(),
              args.dispatch.c_str());
  std::printf("step_ms: %.2f ms\n", wallNs / 1e6 / n);
  std::printf("device_busy_ms: %.2f ms\n", busyNs / 1e6 / n);
  std::printf("device_busy_fraction: %.3f\n", wallNs > 0 ? busyNs / wallNs : 0.0);
  std::printf("device_events_per_step: %ld\n", deviceEvents / n);
  std::printf("host_ops_per_step: %ld\n", hostOps / n);  // operators and their nested calls
  if (gpu) {
    std::printf("device_to_host_copies_per_step: %.1f\n", double(readsBack) / n);
    std::printf("host_synchronizations_per_step: %.1f\n", double(hostWaits) / n);
  }
  printTopHostOps(hostCalls, n);
  if (busyNs > 0) printTopKernels(kernels, busyNs, n);
  return 0;
}
