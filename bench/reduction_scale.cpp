// Issue 38's byte model (core/sync/reduction_bytes.h, simulation only: what it counts and what not
// is said there) printed for 4–256 peers: per-peer bytes a round moves all-to-all against the
// sharded, replicated reduction, R reducers a shard, A audited shards a peer (default 1), and
// where the client's switch (shardingPays) starts sharding. Not the real client's processes (the
// real-process part of the proof is still to come).
//   reduction_scale [--model default|gpu-1b] [--replicas R] [--audits A]
#include "bench/throughput_util.h"
#include "core/sync/reduction_bytes.h"
#include "core/sync/shard_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace es;

namespace {

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "default";
  int replicas = 3, audits = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model"))
      preset = argv[i + 1];
    else if (!std::strcmp(argv[i], "--replicas"))
      replicas = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--audits"))
      audits = std::atoi(argv[i + 1]);
  }
  model::ModelConfig config;
  int batch = 0;
  if (!bench::applyModelPreset(preset, config, batch) || replicas < 1 || audits < 0) {
    std::fprintf(stderr, "usage: reduction_scale [--model default|gpu-1b] [--replicas R >= 1] [--audits A >= 0]\n");
    return 2;
  }
  std::printf(
      "model %s (%lld parameters), int8 contributions, R = %d, %d audited shard(s) per peer; MiB per peer per "
      "round\n",
      preset.c_str(), static_cast<long long>(config.totalParameters()), replicas, audits);
  std::printf("%5s %7s | %12s %12s | %12s %12s %12s %12s\n", "peers", "shards", "a2a recv max", "a2a sent max",
              "shd recv max", "shd recv mean", "shd sent max", "shd max/N=16");
  double at16 = 0;
  for (const int n : {4, 8, 16, 32, 64, 128, 256}) {
    const auto claims = sync::evenClaims(n, config.nExperts);
    const auto a2a = sync::allToAllBytes(config, claims);
    std::size_t shards = 0;
    const auto shd = sync::shardedBytes(config, claims, replicas, audits, &shards);
    const double busiest = double(std::max(shd.mostReceived(), shd.mostSent()));
    if (n == 16) at16 = busiest;
    std::printf("%5d %7zu | %12.1f %12.1f | %12.1f %12.1f %12.1f %12s\n", n, shards, mib(double(a2a.mostReceived())),
                mib(double(a2a.mostSent())), mib(double(shd.mostReceived())), mib(shd.meanReceived()),
                mib(double(shd.mostSent())), at16 > 0 ? std::to_string(busiest / at16).substr(0, 5).c_str() : "-");
  }
  int from = 2;  // the client's switch: the smallest N at which sharding pays (tst_round_topology: and above)
  while (from <= 256 && !sync::shardingPays(config, from, replicas, audits)) ++from;
  if (from > 256)
    std::printf("the client never shards rounds up to 256 senders for this model\n");
  else
    std::printf("the client shards rounds from %d senders with merged work (busiest peer's received bytes)\n", from);
  return 0;
}
