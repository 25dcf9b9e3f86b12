// What robustness costs with honest peers only (issue 15 item 4): the simulated SPES swarm
// (core/sim, the real client's encode → validate → aggregate path) run twice from the same
// initial weights, shards and batches, once with the plain mean of the shared deltas and once
// with centered clipping (core/sync/robust_aggregate.h). Prints `name: value` lines: each run's
// final validation loss, their ratio and the penalty in percent (the default may switch to
// centered_clip only at ≤ 0.5 %).
//
// Defaults: spes_quality's small model (d 128, expert hidden 256, seq 128; 4 layers, 8 experts
// top-2), 4 peers × 2 experts, batch 8, a merge every 20 steps, 240 steps, contiguous shards
// (peers differ in era: the honest spread is at its widest, the hard case for clipping), f32
// contributions in memory, 128 validation windows. --seeds N repeats the pair with data seeds
// 1234 + S, 1235 + S, … (--first-seed S, default 0; the model seed stays the run's).
//
// Usage: robust_merge_cost [--threads N] [--peers P] [--steps N] [--sync-every H] [--batch B]
//                          [--shards contiguous|interleaved] [--iterations K] [--tau X] [--seeds N]
//                          [--first-seed S]
#include "core/common/openmp_policy.h"
#include "core/sim/simulated_swarm.h"
#include "core/train/corpus_prep.h"
#include "core/train/trainer.h"
#include "sim_bench.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

struct Args {
  int threads = 0;  // 0 = all cores
  int peers = 4;
  int steps = 240;
  int syncEvery = 20;
  int batch = 8;
  std::string shards = "contiguous";
  int iterations = es::sync::AggregatePolicy{}.clipIterations;
  double tau = es::sync::AggregatePolicy{}.clipTauFactor;
  int seeds = 1;
  int firstSeed = 0;  // data seeds: the run's seed + firstSeed, + firstSeed + 1, …
  std::string runDir;
};

bool parseArgs(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return false;
    const std::string v = argv[++i];
    if (arg == "--threads")
      a.threads = std::atoi(v.c_str());
    else if (arg == "--peers")
      a.peers = std::atoi(v.c_str());
    else if (arg == "--steps")
      a.steps = std::atoi(v.c_str());
    else if (arg == "--sync-every")
      a.syncEvery = std::atoi(v.c_str());
    else if (arg == "--batch")
      a.batch = std::atoi(v.c_str());
    else if (arg == "--shards")
      a.shards = v;
    else if (arg == "--iterations")
      a.iterations = std::atoi(v.c_str());
    else if (arg == "--tau")
      a.tau = std::atof(v.c_str());
    else if (arg == "--seeds")
      a.seeds = std::atoi(v.c_str());
    else if (arg == "--first-seed")
      a.firstSeed = std::atoi(v.c_str());
    else
      return false;
  }
  if (a.threads <= 0) a.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const char* tmp = std::getenv("TMPDIR");
  a.runDir = std::string(tmp && *tmp ? tmp : "/tmp") + "/expertswarm-bench-run";  // shared with spes_quality
  return a.peers > 0 && a.steps > 0 && a.syncEvery > 0 && a.batch > 0 && a.iterations >= 1 && a.tau > 0 &&
         a.seeds >= 1 && a.firstSeed >= 0 && (a.shards == "contiguous" || a.shards == "interleaved");
}

using es::bench::print;

// spes_quality's small model and schedule (cosine over the run, LR warm-up over its first tenth).
es::sim::SimConfig makeConfig(const Args& a, const es::train::RunData& data) {
  es::sim::SimConfig c;
  c.peers = a.peers;
  c.syncEvery = a.syncEvery;
  c.steps = a.steps;
  c.model = data.manifest.model;
  es::bench::useSmallModel(c.model);
  c.train = data.manifest.train;
  c.train.batchSize = a.batch;
  c.train.totalSteps = a.steps;
  c.train.warmupSteps = a.steps / 10;
  c.evalWindows = 128;
  c.shardBlockTokens = a.shards == "interleaved" ? 32768 : 0;
  c.seed = data.manifest.seed;
  c.codec = es::sync::Codec::F32;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  es::ensurePassiveOpenMpWaits(argv);
  Args args;
  if (!parseArgs(argc, argv, args)) {
    std::fprintf(stderr,
                 "usage: %s [--threads N] [--peers P] [--steps N] [--sync-every H] [--batch B] "
                 "[--shards contiguous|interleaved] [--iterations K] [--tau X] [--seeds N] [--first-seed S]\n",
                 argv[0]);
    return 2;
  }
  es::train::configureTrainingRuntime(args.threads);
  auto log = [](const std::string& line) { std::fprintf(stderr, "robust_merge_cost: %s\n", line.c_str()); };
  if (auto s = es::train::prepareRunData(ES_SHARE_DIR "/runs/sotu-text", args.runDir, log); !s)
    return log("preparing the bundled run: " + s.error()), 1;
  auto data = es::train::loadRunData(args.runDir);
  if (!data) return log(data.error()), 1;
  auto config = makeConfig(args, *data);
  print("peers", args.peers, 0);
  print("steps", args.steps, 0);
  print("sync_every", args.syncEvery, 0);
  print("clip_iterations", args.iterations, 0);
  print("clip_tau_factor", args.tau, 2);
  double sumRatio = 0, worst = 0;
  for (int s = 0; s < args.seeds; ++s) {
    config.dataSeed = data->manifest.seed + static_cast<std::uint64_t>(args.firstSeed + s);
    const std::string tag = "seed" + std::to_string(config.dataSeed) + "_";
    double loss[2] = {0, 0};
    for (int clip = 0; clip < 2; ++clip) {
      config.aggregate = {clip ? es::sync::SharedRule::CenteredClip : es::sync::SharedRule::Mean, args.iterations,
                          args.tau};
      const std::string name = tag + (clip ? "clip" : "mean");
      auto r = es::sim::runSimulation(es::sim::Strategy::Spes, config, *data, log);
      if (!r) return log(name + ": " + r.error()), 1;
      loss[clip] = r->finalValLoss;
      print(name + "_val_loss", r->finalValLoss);
      print(name + "_seconds", r->seconds, 0);
      print(name + "_rejected_contributions", r->rejectedContributions, 0);
      std::printf("%s_peers_identical_after_every_merge: %s\n", name.c_str(),
                  r->peersIdenticalAfterEveryMerge ? "yes" : "NO");
    }
    const double ratio = loss[1] / loss[0];
    print(tag + "clip_over_mean", ratio);
    sumRatio += ratio;
    worst = std::max(worst, ratio);
  }
  print("mean_clip_over_mean", sumRatio / args.seeds);
  print("worst_clip_penalty_percent", 100.0 * (worst - 1.0), 3);
  return 0;
}
