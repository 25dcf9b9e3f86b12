#include "bench/throughput_util.h"

#include "core/model/moe_layer.h"

#include <torch/torch.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace es::bench {
namespace {

double seconds(const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); }

// CPU seconds spent by the whole machine (busy, incl. steal), by us, and by our waited children.
struct CpuSample {
  double machineBusy = 0;
  double self = 0;
  double children = 0;
  std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
};

CpuSample sampleCpu() {
  CpuSample s;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  s.machineBusy = (user + nice + system + irq + softirq + steal) / double(::sysconf(_SC_CLK_TCK));
  rusage self{}, children{};
  ::getrusage(RUSAGE_SELF, &self);
  ::getrusage(RUSAGE_CHILDREN, &children);
  s.self = seconds(self.ru_utime) + seconds(self.ru_stime);
  s.children = seconds(children.ru_utime) + seconds(children.ru_stime);
  return s;
}

double otherCpuLoad(const CpuSample& a, const CpuSample& b) {
  const double wall = std::chrono::duration<double>(b.at - a.at).count();
  const double others = (b.machineBusy - a.machineBusy) - (b.self - a.self) - (b.children - a.children);
  return wall > 0 ? std::max(0.0, others / wall) : 0.0;
}

}  // namespace

std::string shellQuote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::optional<Figures> runChild(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::string command = env.empty() ? "" : "env";
  // Appended piece by piece: `" " + std::string&&` trips GCC 12's -Wstringop-overflow in C++20.
  for (const auto& word : env) command.append(" ").append(shellQuote(word));
  for (const auto& word : argv) command.append(command.empty() ? "" : " ").append(shellQuote(word));
  std::fflush(nullptr);  // the child inherits our buffers' file descriptors, not their contents
  const CpuSample before = sampleCpu();
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return std::nullopt;
  Figures figures;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe)) {
    const std::string text(line);
    const auto colon = text.find(':');
    if (colon == std::string::npos) continue;
    char* end = nullptr;
    const double value = std::strtod(text.c_str() + colon + 1, &end);
    if (end != text.c_str() + colon + 1) figures[text.substr(0, colon)] = value;
  }
  const int status = ::pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "train_throughput: child failed (status %d): %s\n", status, command.c_str());
    return std::nullopt;
  }
  figures["other_cpu_load"] = otherCpuLoad(before, sampleCpu());
  return figures;
}

std::int64_t peakRssBytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
}

double gemmGflops(int n, const std::string& device) {
  torch::NoGradGuard noGrad;
  const bool gpu = device != "cpu";
  if (gpu) n = 8192;
  const auto options =
      gpu ? torch::TensorOptions(torch::kBFloat16).device(torch::Device(device)) : torch::TensorOptions();
  auto a = torch::randn({n, n}, options);
  auto b = torch::randn({n, n}, options);
  auto c = torch::empty({n, n}, options);
  const auto sync = [&] {
    if (gpu) (void)c.sum().item<float>();  // waits for the queued products
  };
  for (int i = 0; i < 2; ++i) torch::mm_out(c, a, b);  // warm-up: pages, OpenBLAS buffers, threads
  sync();
  const double flops = 2.0 * n * double(n) * n;
  constexpr int kBlocks = 3, kReps = 6;
  double best = 0;
  for (int block = 0; block < kBlocks; ++block) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kReps; ++i) torch::mm_out(c, a, b);
    sync();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, kReps * flops / seconds / 1e9);
  }
  return best;
}

double trainFlopsPerToken(const model::ModelConfig& c) {
  const double attention = 12.0 * c.nLayers * double(c.seqLen) * c.dModel;
  return 6.0 * double(c.activeParametersPerToken()) + attention;
}

std::int64_t frozenExpertSavingBytes(const model::ModelConfig& c, int trainable, int copies) {
  const std::int64_t frozen = std::int64_t(c.nExperts - trainable) * c.nLayers;
  return frozen * c.expertParameters() * copies * std::int64_t(sizeof(float));
}

bool applyModelPreset(const std::string& name, model::ModelConfig& model, int& batchSize) {
  if (name == "default") return true;
  if (name != "gpu-1b") return false;
  model.dModel = 1024;
  model.nLayers = 12;
  model.nHeads = 16;
  model.nExperts = 16;
  model.topK = 2;
  model.expertHidden = 1536;
  model.seqLen = 1024;
  batchSize = 16;
  return true;
}

bool parseExpertDispatch(const std::string& name, model::ExpertDispatch& dispatch) {
  if (name == "auto")
    dispatch = model::ExpertDispatch::Auto;
  else if (name == "loop")
    dispatch = model::ExpertDispatch::Loop;
  else if (name == "batched")
    dispatch = model::ExpertDispatch::Batched;
  else if (name == "grouped")
    dispatch = model::ExpertDispatch::Grouped;
  else
    return false;
  return true;
}

}  // namespace es::bench
