// Training throughput of the default run, printed as `name: value unit` lines:
//   tokens/s with all experts trainable and with 2 (experts {0,1}), the peak RSS of each (each in
//   its own child process, so the peaks do not mix), the GEMM peak of this machine through
//   LibTorch, the training FLOP/s as a fraction of it, and the same model in Python
//   (train_throughput_ref.py) for a C++/Python ratio.
//
// Usage: train_throughput [--threads N] [--steps N] [--warmup N] [--run-dir DIR] [--device DEVICE]
//                         [--model default|gpu-1b] [--dispatch auto|loop|batched|grouped]
//                         [--python PATH | --no-python]
// --device cuda: the same model on the GPU, its peak measured as a bf16 GEMM, MFU against it
// (issue 16; the Python reference is CPU-only and is skipped). --model gpu-1b: the GPU-sized
// config (throughput_util.h) instead of the run's; the Python reference is skipped for it too.
// --dispatch: how the experts run (core/model/moe_layer.h; auto: batched on a GPU, looped on a CPU;
// grouped: one at::_grouped_mm per product, LibTorch >= 2.9).
// Hidden: --child all|two  (measure one configuration; used by the parent on itself)
#include "bench/throughput_child.h"
#include "bench/throughput_util.h"
#include "core/common/openmp_policy.h"
#include "core/train/corpus_prep.h"
#include "core/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

using es::bench::Figures;

struct Args {
  int threads = 0;  // 0 = all cores
  int steps = 25;
  int warmup = 3;
  std::string runDir;
  std::string python = "/usr/bin/python3";  // Debian's torch lives in the system interpreter
  bool runPython = true;
  std::string child;  // "all" or "two": this process is a measuring child
  std::string device = "cpu";
  std::string model = "default";
  std::string dispatch = "auto";
};

bool parseArgs(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (arg == "--threads" && next(v))
      a.threads = std::atoi(v.c_str());
    else if (arg == "--steps" && next(v))
      a.steps = std::atoi(v.c_str());
    else if (arg == "--warmup" && next(v))
      a.warmup = std::atoi(v.c_str());
    else if (arg == "--run-dir" && next(v))
      a.runDir = v;
    else if (arg == "--python" && next(v))
      a.python = v;
    else if (arg == "--model" && next(v))
      a.model = v;
    else if (arg == "--dispatch" && next(v))
      a.dispatch = v;
    else if (arg == "--device" && next(v))
      a.device = v;
    else if (arg == "--no-python")
      a.runPython = false;
    else if (arg == "--child" && next(v))
      a.child = v;
    else
      return false;
  }
  if (a.threads <= 0) a.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (a.runDir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    // Kept between runs: preparing the corpus (BPE training) is slow and prepareRunData reuses a
    // folder whose run.json still matches.
    a.runDir = std::string(tmp && *tmp ? tmp : "/tmp") + "/expertswarm-bench-run";
  }
  return a.steps > 0 && a.warmup >= 0 && (a.child.empty() || a.child == "all" || a.child == "two");
}

void print(const char* name, double value, const char* unit, int decimals = 0) {
  std::printf("%s: %.*f%s%s\n", name, decimals, value, *unit ? " " : "", unit);
  std::fflush(stdout);
}

double figure(const Figures& f, const std::string& name) {
  auto it = f.find(name);
  return it == f.end() ? 0.0 : it->second;
}

// This executable's path: the children are started through /bin/sh, where /proc/self/exe is the shell.
std::string selfPath() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<std::size_t>(n)) : std::string("/proc/self/exe");
}

std::optional<Figures> measure(const Args& a, const std::string& which) {
  std::fprintf(stderr, "train_throughput: training with %s experts trainable...\n", which.c_str());
  return es::bench::runChild({selfPath(), "--child", which, "--threads", std::to_string(a.threads), "--steps",
                              std::to_string(a.steps), "--warmup", std::to_string(a.warmup), "--run-dir", a.runDir,
                              "--device", a.device, "--model", a.model, "--dispatch", a.dispatch});
}

}  // namespace

int main(int argc, char** argv) {
  es::ensurePassiveOpenMpWaits(argv);
  Args args;
  if (!parseArgs(argc, argv, args)) {
    std::fprintf(stderr,
                 "usage: %s [--threads N] [--steps N] [--warmup N] [--run-dir DIR] [--device DEVICE] "
                 "[--model default|gpu-1b] [--dispatch auto|loop|batched|grouped] [--python PATH | --no-python]\n",
                 argv[0]);
    return 2;
  }
  es::train::configureTrainingRuntime(args.threads);  // mallopt + torch threads, as the app does
  if (!args.child.empty()) {
    es::bench::ChildOptions child{args.runDir, {}, args.warmup, args.steps, args.device, args.model, args.dispatch};
    if (args.child == "two") child.localExperts = {0, 1};
    return es::bench::runTrainingChild(child);
  }

  const auto prepStart = std::chrono::steady_clock::now();
  auto log = [](const std::string& line) { std::fprintf(stderr, "train_throughput: %s\n", line.c_str()); };
  if (auto s = es::train::prepareRunData(ES_SHARE_DIR "/runs/sotu-text", args.runDir, log); !s) {
    log("preparing the bundled run: " + s.error());
    return 1;
  }
  auto manifest = es::train::loadRunManifest(args.runDir + "/run.json");
  if (!manifest) {
    log(manifest.error());
    return 1;
  }
  log("run data ready in " + args.runDir + " (" +
      std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - prepStart).count()) + " s)");
  auto model = manifest->model;
  int batchSize = manifest->train.batchSize;
  if (!es::bench::applyModelPreset(args.model, model, batchSize)) {
    log("--model must be default or gpu-1b, not " + args.model);
    return 2;
  }
  const int tokensPerStep = batchSize * model.seqLen;
  std::printf("model: %s\n", args.model.c_str());
  std::printf("expert_dispatch: %s\n", args.dispatch.c_str());

  print("threads", args.threads, "");
  const char* waitPolicy = std::getenv("OMP_WAIT_POLICY");
  std::printf("omp_wait_policy: %s\n", waitPolicy ? waitPolicy : "(unset)");
  print("tokens_per_step", tokensPerStep, "tok");
  print("parameters_model_config", double(model.totalParameters()), "");
  if (auto usable = es::train::checkDevice(args.device); !usable) {
    log("--device: " + usable.error());
    return 2;
  }
  std::printf("device: %s\n", args.device.c_str());
  const double gemm = es::bench::gemmGflops(2048, args.device);
  print(args.device == "cpu" ? "gemm_gflops" : "gemm_bf16_gflops", gemm, "GFLOP/s", 1);

  const auto all = measure(args, "all");
  const auto two = measure(args, "two");
  if (!all || !two) return 1;
  print("tokens_per_s_all_experts", figure(*all, "tokens_per_s"), "tok/s");
  print("tokens_per_s_two_experts", figure(*two, "tokens_per_s"), "tok/s");
  print("step_ms_median_all_experts", figure(*all, "step_ms_median"), "ms", 1);
  print("step_ms_median_two_experts", figure(*two, "step_ms_median"), "ms", 1);
  // Cores other processes kept busy meanwhile: over ~0.2 the figures above are skewed.
  print("other_cpu_load_all_experts", figure(*all, "other_cpu_load"), "cores", 2);
  print("other_cpu_load_two_experts", figure(*two, "other_cpu_load"), "cores", 2);
  print("parameters_cpp_model", figure(*all, "parameters"), "");
  if (figure(*all, "parameters") != double(model.totalParameters())) {
    log("the C++ model's parameter count differs from ModelConfig::totalParameters()");
    return 1;
  }
  const double rssAll = figure(*all, "peak_rss_bytes"), rssTwo = figure(*two, "peak_rss_bytes");
  print("peak_rss_all_experts", rssAll / 1e6, "MB");
  print("peak_rss_two_experts", rssTwo / 1e6, "MB");
  print("rss_saving_measured", (rssAll - rssTwo) / 1e6, "MB");
  print("rss_saving_analytic", double(es::bench::frozenExpertSavingBytes(model, 2)) / 1e6, "MB");
  print("rss_saving_analytic_moments_only", double(es::bench::frozenExpertSavingBytes(model, 2, 2)) / 1e6, "MB");
  if (args.device != "cpu") {  // NVML's figures; absent (0) without the driver's library
    const double gpuAll = figure(*all, "gpu_memory_used_bytes"), gpuTwo = figure(*two, "gpu_memory_used_bytes");
    print("gpu_memory_all_experts", gpuAll / 1e6, "MB");
    print("gpu_memory_two_experts", gpuTwo / 1e6, "MB");
    print("gpu_memory_saving_measured", (gpuAll - gpuTwo) / 1e6, "MB");
  }
  print("rss_after_setup_all_experts", figure(*all, "rss_after_setup_bytes") / 1e6, "MB");
  print("rss_after_setup_two_experts", figure(*two, "rss_after_setup_bytes") / 1e6, "MB");

  const double flopsPerToken = es::bench::trainFlopsPerToken(model);
  const double trainGflops = figure(*all, "tokens_per_s") * flopsPerToken / 1e9;
  print("train_mflop_per_token", flopsPerToken / 1e6, "MFLOP/tok", 1);
  print("train_gflops_all_experts", trainGflops, "GFLOP/s", 1);
  print("train_fraction_of_gemm_peak", gemm > 0 ? trainGflops / gemm : 0.0, "", 2);
  if (args.device != "cpu") print("mfu", gemm > 0 ? trainGflops / gemm : 0.0, "", 3);  // vs the bf16 peak

  if (!args.runPython || args.device != "cpu" || args.model != "default") return 0;
  std::fprintf(stderr, "train_throughput: training the Python reference...\n");
  const auto py = es::bench::runChild({args.python, ES_BENCH_SOURCE_DIR "/train_throughput_ref.py", "--run-dir",
                                       args.runDir, "--threads", std::to_string(args.threads), "--steps",
                                       std::to_string(args.steps), "--warmup", std::to_string(args.warmup)});
  if (!py) return 1;
  const double pyTokens = figure(*py, "tokens_per_s");
  print("python_tokens_per_s_all_experts", pyTokens, "tok/s");
  print("python_step_ms_median_all_experts", figure(*py, "step_ms_median"), "ms", 1);
  print("python_peak_rss_all_experts", figure(*py, "peak_rss_bytes") / 1e6, "MB");
  print("other_cpu_load_python", figure(*py, "other_cpu_load"), "cores", 2);
  print("python_parameters", figure(*py, "parameters"), "");
  const bool sameSize = figure(*py, "parameters") == double(model.totalParameters());
  print("python_parameters_match", sameSize ? 1 : 0, "");
  // Same seed, same batches, same init order: equal losses say both sides train the same model.
  print("loss_last_cpp", figure(*all, "loss_last"), "", 4);
  print("loss_last_python", figure(*py, "loss_last"), "", 4);
  print("cpp_over_python", pyTokens > 0 ? figure(*all, "tokens_per_s") / pyTokens : 0.0, "", 2);
  return sameSize ? 0 : 1;
}
