// Peak memory of one round's merge against the number of contributions (issue 14 item 3): the
// client's merge (sync::mergeRound fed from contribution files, as SpesPeer::merge does) must
// stay flat in the count, because it reads one contribution at a time.
//
// The default run's model (d 256, 4 layers, 8 experts of hidden 512; 15.6 M parameters) and its
// contribution format (int8; shared tensors + the sender's 2 claimed experts, 2 senders per
// expert). For each count N it writes N contribution files, then merges them in a fresh child
// process and reads the kernel's high-water mark (VmHWM) of that process; the base state and the
// libraries are loaded before the merge, so `merge_extra_rss_mb` is what the merge added.
// `--held` also runs the all-at-once shape (every contribution decoded before the merge), for
// comparison. Prints `name: value unit` lines.
//
// Usage: merge_memory [--counts 2,8,32] [--aggregate centered_clip|mean] [--held]
#include "core/model/moe_transformer.h"
#include "core/model/tensor_names.h"
#include "core/sync/contribution_file.h"
#include "core/sync/round_merge.h"

#include <torch/torch.h>

#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace es;

namespace {

const std::string kRun = "merge-memory";
constexpr int kExpertsPerPeer = 2;

// The default run's model, seeded: the base state every contribution is against.
ckpt::NamedTensors baseState(const model::ModelConfig& config) {
  torch::manual_seed(1234);
  model::MoeTransformer model(config);
  ckpt::NamedTensors base;
  for (const auto& item : model->named_parameters()) base.emplace_back(item.key(), item.value().detach().clone());
  return base;
}

std::set<int> claimsOf(int peer, const model::ModelConfig& config) {
  std::set<int> claims;
  for (int k = 0; k < kExpertsPerPeer; ++k) claims.insert((peer * kExpertsPerPeer + k) % config.nExperts);
  return claims;
}

std::string fileOf(const std::string& dir, int peer) { return dir + "/peer-" + std::to_string(peer) + ".safetensors"; }

// Peer p's deltas: every shared tensor and its claimed experts' tensors, small random steps.
void writeContributions(const std::string& dir, int count, const ckpt::NamedTensors& base,
                        const model::ModelConfig& config, const std::string& baseHash) {
  for (int p = 0; p < count; ++p) {
    const auto claims = claimsOf(p, config);
    ckpt::NamedTensors deltas;
    for (const auto& [name, tensor] : base) {
      const auto expert = model::expertOf(name);
      if (expert && !claims.count(expert->expert)) continue;
      deltas.emplace_back(name, torch::randn(tensor.sizes()) * 1e-3);
    }
    const sync::ContributionHeader header{kRun, 1, "peer-" + std::to_string(p), baseHash, "int8"};
    if (auto s = sync::saveContribution(fileOf(dir, p), header, deltas); !s) {
      std::fprintf(stderr, "merge_memory: %s\n", s.error().c_str());
      std::exit(1);
    }
  }
}

// /proc/self/status's value of `key` (kB), in MiB.
double statusMiB(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(key + ":", 0) == 0) return std::strtod(line.c_str() + key.size() + 1, nullptr) / 1024.0;
  return -1;
}

// The child: merge `count` contributions from `dir`, print its memory and time.
int mergeChild(const std::string& dir, int count, const std::string& aggregate, bool held) {
  torch::set_num_threads(1);
  const model::ModelConfig config;
  const auto base = baseState(config);
  const sync::RoundContext context{kRun, 1, sync::stateFingerprint(base)};
  std::vector<sync::RoundEntry> entries;
  for (int p = 0; p < count; ++p) {
    auto header = sync::readContributionHeader(fileOf(dir, p));
    if (!header) return std::fprintf(stderr, "merge_memory: %s\n", header.error().c_str()), 1;
    auto source = sync::contributionDeltas(fileOf(dir, p), *header);
    if (held) {  // the all-at-once shape
      auto deltas = source();
      if (!deltas) return std::fprintf(stderr, "merge_memory: %s\n", deltas.error().c_str()), 1;
      source = sync::heldDeltas(std::move(*deltas));
    }
    entries.push_back({*header, std::move(source), claimsOf(p, config)});
  }
  sync::RoundPolicy policy;
  policy.aggregate.shared = *sync::parseSharedRule(aggregate);
  const double before = statusMiB("VmRSS");
  const auto start = std::chrono::steady_clock::now();
  auto merge = sync::mergeRound(base, context, std::move(entries), policy, 50, config);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!merge) return std::fprintf(stderr, "merge_memory: %s\n", merge.error().c_str()), 1;
  if (static_cast<int>(merge->accepted.size()) != count)
    return std::fprintf(stderr, "merge_memory: %zu of %d accepted\n", merge->accepted.size(), count), 1;
  std::printf("%.1f %.1f %.3f\n", statusMiB("VmHWM"), before, seconds);
  return 0;
}

// Runs this program as a fresh child for one measurement; its one output line.
std::string runChild(const std::string& dir, int count, const std::string& aggregate, bool held) {
  const std::string command = "/proc/" + std::to_string(getpid()) + "/exe --child " + std::to_string(count) + " " +
                              dir + " " + aggregate + (held ? " held" : " stream");
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {};
  char line[256] = {};
  const bool got = std::fgets(line, sizeof line, pipe) != nullptr;
  return pclose(pipe) == 0 && got ? std::string(line) : std::string();
}

std::vector<int> parseCounts(const std::string& text) {
  std::vector<int> counts;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) counts.push_back(std::atoi(item.c_str()));
  return counts;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--child")
    return mergeChild(argv[3], std::atoi(argv[2]), argv[4], std::string(argv[5]) == "held");
  std::vector<int> counts{2, 8, 32};
  std::string aggregate = "centered_clip";
  bool held = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--held") {
      held = true;
    } else if (arg == "--counts" && i + 1 < argc) {
      counts = parseCounts(argv[++i]);
    } else if (arg == "--aggregate" && i + 1 < argc && sync::parseSharedRule(argv[i + 1])) {
      aggregate = argv[++i];
    } else {
      std::fprintf(stderr, "usage: merge_memory [--counts 2,8,32] [--aggregate centered_clip|mean] [--held]\n");
      return 2;
    }
  }
  int most = 0;
  for (int n : counts) most = std::max(most, n);
  const std::string dir = (fs::temp_directory_path() / ("merge_memory-" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  const model::ModelConfig config;
  const auto base = baseState(config);
  writeContributions(dir, most, base, config, sync::stateFingerprint(base));
  std::printf("model_parameters: %lld\n", static_cast<long long>(config.totalParameters()));
  std::printf("contribution_file_mb: %.1f\n", fs::file_size(fileOf(dir, 0)) / 1048576.0);
  std::printf("aggregate: %s\n", aggregate.c_str());
  int status = 0;
  for (const bool h : held ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
    const std::string shape = h ? "held_" : "";
    for (int n : counts) {
      double peak = 0, before = 0, seconds = 0;
      if (std::sscanf(runChild(dir, n, aggregate, h).c_str(), "%lf %lf %lf", &peak, &before, &seconds) != 3) {
        std::fprintf(stderr, "merge_memory: the child merging %d contributions failed\n", n);
        status = 1;
        continue;
      }
      std::printf("%smerge_peak_rss_mb_%d: %.1f MiB\n", shape.c_str(), n, peak);
      std::printf("%smerge_extra_rss_mb_%d: %.1f MiB\n", shape.c_str(), n, peak - before);
      std::printf("%smerge_seconds_%d: %.2f s\n", shape.c_str(), n, seconds);
      std::fflush(stdout);
    }
  }
  fs::remove_all(dir);
  return status;
}
