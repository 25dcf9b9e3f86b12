// SPES against same-compute baselines on the bundled corpus (issue 3, acceptance 3), printed as
// `name: value` lines. Five runs from the same initial weights and the same token budget:
//   centralized   one trainer, all experts, batch = peers × per-peer batch
//   spes          P peers, k = E/P experts each, f32 contributions, no merging warm-up
//   spes_warmup   the same with SPES's merging warm-up
//   spes_int8     spes with int8 contributions (the bundled run's compression)
//   fedavg        P peers training every expert, every tensor averaged at every merge
// plus contribution bytes per peer per sync (f32, bf16, int8, SPES's full f32 weights) and the
// optimizer state per peer.
//
// Defaults (≤ 20 min on 2 cores): a smaller model than the bundled run's (d 128, expert hidden
// 256, seq 128; same vocab, 4 layers, 8 experts, top-2: the SPES structure is unchanged) trains
// ~2× the tokens/s of the default model, which buys 2× the steps: 4 peers × batch 8 × 128 tokens
// = 4096 tokens per step, 240 steps, a merge every 20 steps (12 merges). Peers get contiguous
// shards (the corpus is chronological, so peers differ in era; --shards interleaved deals 32 Ki
// blocks instead). Validation loss: 128 windows spread over the whole validation set, the same
// for every run. Contributions go through contribution files (--no-files: in memory).
// --model tiny (d 64, expert hidden 128, seq 64) is what bench/spes_sweep runs issue 18's
// merge-rule grid on (≥ 50 merges per run); --outer-* name the outer Nesterov step
// (core/sync/outer_step.h) the client runs when a run's manifest names swarm.outer_step.
//
// Usage: spes_quality [--threads N] [--peers P] [--steps N] [--sync-every H] [--batch B]
//                     [--central-batch B] [--model small|tiny|default] [--lr X] [--lr-warmup N] [--eval-every N]
//                     [--eval-windows N]
//                     [--shards contiguous|interleaved]
//                     [--alpha0 X] [--warmup-interval N] [--warmup-decay N] [--topk K] [--runs a,b,..]
//                     [--outer-lr X --outer-momentum X --outer-on all|shared|experts]  (see SimConfig)
//                     [--seed N] [--run-dir DIR] [--no-files]
//                     [--sparse-keep K [--sparse-chunk C (4096)] [--sparse-wait-rounds W (0: the client's rule)]] (adds
//                     spes_sparse: issue 39's codec, core/sync/sparse_codec.h, with error feedback;
//                     in memory, never through files; a sent value held to W rounds' update ceiling)
//                     [--sparse-mean]  (each shared element averaged over the senders that sent it)
//                     [--sparse-bits 8|2] [--feedback-decay B (1)]  (2-bit values, bytes as packed;
//                     the error feedback's decay)
//                     [--shared-rule mean|centered_clip]  (the shared tensors' rule; the client's is centered_clip)
//                     [--clip-shards-for P]  (centered clipping per shard of issue 38's plan for P peers,
//                     shard_plan.h's shardElementsFor; 0, the default: one distance over all shared tensors)
#include "core/common/openmp_policy.h"
#include "core/sim/simulated_swarm.h"
#include "core/sync/merge.h"
#include "core/sync/shard_plan.h"
#include "core/train/corpus_prep.h"
#include "core/train/trainer.h"
#include "sim_bench.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <thread>

namespace {

using es::sim::SimResult;
using es::sim::Strategy;

struct Args {
  int threads = 0;  // 0 = all cores
  int peers = 4;
  int steps = 240;
  int syncEvery = 20;
  int batch = 8;
  int centralBatch = 0;  // 0 = peers × batch (equal tokens)
  std::string model = "small";
  double lr = 0;                      // 0 = the run's
  int lrWarmup = -1;                  // -1 = steps / 10
  int evalEvery = 0;                  // steps between validation points (a multiple of H); 0 = every merge
  int evalWindows = 128;              // × 128 tokens = 16 Ki validation tokens, spread over the whole val set
  std::string shards = "contiguous";  // or "interleaved" (32 Ki-token blocks dealt round-robin)
  double alpha0 = 0.5;                // run.json merge_warmup
  int warmupInterval = 0;             // 0 = sync_every (run.json: interval = sync_every)
  int warmupDecay = -1;               // -1 = steps / 5 (run.json: 1000 of 5000 steps)
  int topk = 4;
  double outerLr = 1.0;  // DiLoCo's outer step (core/sync/outer_step.h); 1 and 0 = plain average
  double outerMomentum = 0.0;
  std::string outerOn = "all";  // or "shared" / "experts"
  std::string runs = "centralized,spes,spes_warmup,spes_int8,fedavg";
  std::uint64_t seed = 0;  // model initialisation and data sampling; 0 = the run's (run.json)
  std::string runDir;
  bool files = true;            // contributions round-trip through contribution files
  std::int64_t sparseKeep = 0;  // > 0: also run spes_sparse (top-keep per chunk, error feedback)
  std::int64_t sparseChunk = 4096;
  int sparseWaitRounds = 0;  // 0: the client's rule (sync::sparseWaitRounds)
  bool sparseMean = false;
  int sparseBits = 8;
  double feedbackDecay = 1.0;
  std::string sharedRule = "mean";  // the simulator's default; the client's run default is centered_clip
  int clipShardsFor = 0;
};

bool parseArgs(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string v;
    auto next = [&] { return i + 1 < argc ? (v = argv[++i], true) : false; };
    if (arg == "--threads" && next())
      a.threads = std::atoi(v.c_str());
    else if (arg == "--peers" && next())
      a.peers = std::atoi(v.c_str());
    else if (arg == "--steps" && next())
      a.steps = std::atoi(v.c_str());
    else if (arg == "--sync-every" && next())
      a.syncEvery = std::atoi(v.c_str());
    else if (arg == "--batch" && next())
      a.batch = std::atoi(v.c_str());
    else if (arg == "--central-batch" && next())
      a.centralBatch = std::atoi(v.c_str());
    else if (arg == "--model" && next())
      a.model = v;
    else if (arg == "--lr" && next())
      a.lr = std::atof(v.c_str());
    else if (arg == "--lr-warmup" && next())
      a.lrWarmup = std::atoi(v.c_str());
    else if (arg == "--eval-every" && next())
      a.evalEvery = std::atoi(v.c_str());
    else if (arg == "--eval-windows" && next())
      a.evalWindows = std::atoi(v.c_str());
    else if (arg == "--shards" && next())
      a.shards = v;
    else if (arg == "--alpha0" && next())
      a.alpha0 = std::atof(v.c_str());
    else if (arg == "--warmup-interval" && next())
      a.warmupInterval = std::atoi(v.c_str());
    else if (arg == "--warmup-decay" && next())
      a.warmupDecay = std::atoi(v.c_str());
    else if (arg == "--topk" && next())
      a.topk = std::atoi(v.c_str());
    else if (arg == "--outer-lr" && next())
      a.outerLr = std::atof(v.c_str());
    else if (arg == "--outer-momentum" && next())
      a.outerMomentum = std::atof(v.c_str());
    else if (arg == "--outer-on" && next())
      a.outerOn = v;
    else if (arg == "--runs" && next())
      a.runs = v;
    else if (arg == "--seed" && next())
      a.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (arg == "--run-dir" && next())
      a.runDir = v;
    else if (arg == "--no-files")
      a.files = false;
    else if (arg == "--sparse-keep" && next())
      a.sparseKeep = std::atoll(v.c_str());
    else if (arg == "--sparse-chunk" && next())
      a.sparseChunk = std::atoll(v.c_str());
    else if (arg == "--sparse-wait-rounds" && next())
      a.sparseWaitRounds = std::atoi(v.c_str());
    else if (arg == "--sparse-mean")
      a.sparseMean = true;
    else if (arg == "--sparse-bits" && next())
      a.sparseBits = std::atoi(v.c_str());
    else if (arg == "--feedback-decay" && next())
      a.feedbackDecay = std::atof(v.c_str());
    else if (arg == "--shared-rule" && next())
      a.sharedRule = v;
    else if (arg == "--clip-shards-for" && next())
      a.clipShardsFor = std::atoi(v.c_str());
    else
      return false;
  }
  if (a.sparseKeep < 0 || (a.sparseKeep > 0 && (a.sparseKeep > a.sparseChunk || a.sparseChunk > 32768))) return false;
  if ((a.sparseBits != 8 && a.sparseBits != 2) || !(a.feedbackDecay > 0 && a.feedbackDecay <= 1)) return false;
  if (a.sparseWaitRounds < 0 || a.clipShardsFor < 0 || !es::sync::parseSharedRule(a.sharedRule)) return false;
  if (a.sparseKeep > 0 && a.runs.find("spes_sparse") == std::string::npos) a.runs += ",spes_sparse";
  if (a.threads <= 0) a.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (a.lrWarmup < 0) a.lrWarmup = a.steps / 10;
  if (a.warmupDecay < 0) a.warmupDecay = std::max(1, a.steps / 5);
  const char* tmp = std::getenv("TMPDIR");
  // Shared with train_throughput: preparing the corpus trains the BPE; a matching folder is reused.
  if (a.runDir.empty()) a.runDir = std::string(tmp && *tmp ? tmp : "/tmp") + "/expertswarm-bench-run";
  return a.peers > 0 && a.steps > 0 && a.syncEvery > 0 && a.batch > 0 && a.evalWindows > 0 &&
         (a.shards == "contiguous" || a.shards == "interleaved") &&
         (a.model == "small" || a.model == "tiny" || a.model == "default") &&
         es::sync::parseOuterOn(a.outerOn).has_value();
}

using es::bench::print;

void printText(const std::string& name, const std::string& value) {
  std::printf("%s: %s\n", name.c_str(), value.c_str());
  std::fflush(stdout);
}

es::sim::SimConfig makeConfig(const Args& a, const es::train::RunData& data) {
  es::sim::SimConfig c;
  c.peers = a.peers;
  c.syncEvery = a.syncEvery;
  c.steps = a.steps;
  c.model = data.manifest.model;
  if (a.model == "small") es::bench::useSmallModel(c.model);
  if (a.model == "tiny") es::bench::useTinyModel(c.model);
  c.train = data.manifest.train;
  c.train.batchSize = a.batch;
  c.centralBatch = a.centralBatch;
  c.train.totalSteps = a.steps;  // the whole cosine schedule (and SPES's 20% ramp) in this run
  c.train.warmupSteps = a.lrWarmup;
  c.evalWindows = a.evalWindows;
  c.evalEvery = a.evalEvery;
  c.shardBlockTokens = a.shards == "interleaved" ? 32768 : 0;
  if (a.lr > 0) c.train.lr = a.lr;
  c.seed = a.seed ? a.seed : data.manifest.seed;
  c.dataSeed = c.seed;
  // run.json's merge warm-up (interval = sync_every, decay over the first 20% of the run),
  // scaled to this run's length.
  c.warmupConfig.interval = a.warmupInterval > 0 ? a.warmupInterval : a.syncEvery;
  c.warmupConfig.alpha0 = a.alpha0;
  c.warmupConfig.decaySteps = a.warmupDecay;
  c.warmupConfig.topk = a.topk;
  c.outer.lr = a.outerLr;
  c.outer.momentum = a.outerMomentum;
  c.outer.on = *es::sync::parseOuterOn(a.outerOn);  // parseArgs refused any other name
  return c;
}

bool wanted(const Args& a, const std::string& run) {
  std::stringstream list(a.runs);
  for (std::string item; std::getline(list, item, ',');)
    if (item == run) return true;
  return false;
}

void printRun(const std::string& name, const SimResult& r) {
  print(name + "_val_loss", r.finalValLoss);
  print(name + "_seconds", r.seconds, 0, "s");
  std::ostringstream curve;
  for (const auto& p : r.curve) curve << (curve.tellp() ? " " : "") << p.step << ":" << p.valLoss;
  std::fprintf(stderr, "spes_quality: %s val curve %s\n", name.c_str(), curve.str().c_str());
  if (r.strategy == Strategy::Centralized) return;
  printText(name + "_peers_identical_after_every_merge", r.peersIdenticalAfterEveryMerge ? "yes" : "NO");
  print(name + "_merges", r.merges, 0);
  if (r.warmupMerges) print(name + "_warmup_merges", r.warmupMerges, 0);
  if (r.rejectedContributions) print(name + "_rejected_contributions", r.rejectedContributions, 0);
  print(name + "_uncredited_contributions", r.uncreditedContributions, 0);
  print(name + "_lowest_agreement", r.lowestAgreement, 4);
}

}  // namespace

int main(int argc, char** argv) {
  es::ensurePassiveOpenMpWaits(argv);
  Args args;
  if (!parseArgs(argc, argv, args)) {
    std::fprintf(stderr,
                 "usage: %s [--threads N] [--peers P] [--steps N] [--sync-every H] [--batch B] "
                 "[--central-batch B] [--model small|tiny|default] [--lr X] [--lr-warmup N] [--eval-every N] "
                 "[--eval-windows N] [--shards "
                 "contiguous|interleaved] [--alpha0 X] "
                 "[--warmup-interval N] [--warmup-decay N] [--topk K] [--outer-lr X] [--outer-momentum X] [--outer-on "
                 "all|shared|experts] [--runs "
                 "centralized,spes,spes_warmup,spes_int8,fedavg] "
                 "[--seed N] [--run-dir DIR] [--no-files] [--sparse-keep K] [--sparse-chunk C] [--sparse-wait-rounds "
                 "W] [--sparse-mean] [--sparse-bits 8|2] [--feedback-decay B]\n",
                 argv[0]);
    return 2;
  }
  es::train::configureTrainingRuntime(args.threads);
  auto log = [](const std::string& line) { std::fprintf(stderr, "spes_quality: %s\n", line.c_str()); };
  if (auto s = es::train::prepareRunData(ES_SHARE_DIR "/runs/sotu-text", args.runDir, log); !s) {
    log("preparing the bundled run: " + s.error());
    return 1;
  }
  auto data = es::train::loadRunData(args.runDir);
  if (!data) {
    log(data.error());
    return 1;
  }
  const auto base = makeConfig(args, *data);
  std::string fileDir;
  if (args.files) {
    std::string pattern = args.runDir + "-contrib-XXXXXX";
    if (!::mkdtemp(pattern.data())) return log("cannot create a folder for contribution files"), 1;
    fileDir = pattern;
  }
  printText("model", args.model + " (d " + std::to_string(base.model.dModel) + ", " +
                         std::to_string(base.model.nLayers) + " layers, " + std::to_string(base.model.nExperts) +
                         " experts top-" + std::to_string(base.model.topK) + ", hidden " +
                         std::to_string(base.model.expertHidden) + ", seq " + std::to_string(base.model.seqLen) + ")");
  print("model_parameters", double(base.model.totalParameters()), 0);
  print("peers", base.peers, 0);
  print("experts_per_peer", std::max(1, base.model.nExperts / base.peers), 0);
  print("steps", base.steps, 0);
  print("sync_every", base.syncEvery, 0);
  print("batch_per_peer", base.train.batchSize, 0);
  print("batch_centralized", base.centralBatch > 0 ? base.centralBatch : base.peers * base.train.batchSize, 0);
  print("lr", base.train.lr, 4);
  print("threads", args.threads, 0);
  print("seed", double(base.seed), 0);
  printText("shards", args.shards);
  print("eval_windows", args.evalWindows, 0);
  if (!base.outer.plain()) {
    print("outer_lr", args.outerLr, 2);
    print("outer_momentum", args.outerMomentum, 2);
    printText("outer_on", args.outerOn);
  }
  print("tokens_per_run", double(base.steps) * base.peers * base.train.batchSize * base.model.seqLen, 0);

  std::map<std::string, SimResult> results;
  auto run = [&](const std::string& name, Strategy strategy, es::sync::Codec codec, bool warmup) {
    if (!wanted(args, name)) return true;
    auto config = base;
    config.codec = codec;
    if (name == "spes_sparse") config.sparse = {args.sparseChunk, args.sparseKeep, args.sparseBits};
    config.feedbackDecay = args.feedbackDecay;
    config.sparseWaitRounds = args.sparseWaitRounds;
    config.sparseMean = args.sparseMean;
    config.aggregate.shared = *es::sync::parseSharedRule(args.sharedRule);
    if (args.clipShardsFor > 0)
      config.aggregate.clipShardElements = es::sync::shardElementsFor(config.model, args.clipShardsFor);
    config.warmup = warmup;
    if (strategy != Strategy::Centralized) config.contributionDir = fileDir;
    log("run " + name + "...");
    auto result = es::sim::runSimulation(strategy, config, *data, log);
    if (!result) return log(name + ": " + result.error()), false;
    printRun(name, *result);
    results.emplace(name, std::move(*result));
    return true;
  };
  using es::sync::Codec;
  const bool ok =
      run("centralized", Strategy::Centralized, Codec::F32, false) && run("spes", Strategy::Spes, Codec::F32, false) &&
      run("spes_warmup", Strategy::Spes, Codec::F32, true) && run("spes_int8", Strategy::Spes, Codec::Int8, false) &&
      run("fedavg", Strategy::FedAvg, Codec::F32, false) &&
      (args.sparseKeep == 0 || run("spes_sparse", Strategy::Spes, Codec::F32, false));
  if (!fileDir.empty()) {
    std::error_code ignored;  // a leftover temp folder is not worth failing the benchmark for
    std::filesystem::remove_all(fileDir, ignored);
  }
  if (!ok) return 1;

  auto has = [&](const char* name) { return results.count(name) > 0; };
  if (!results.empty()) print("initial_val_loss", results.begin()->second.initialValLoss);
  if (has("centralized")) {
    const double central = results.at("centralized").finalValLoss;
    for (const char* name : {"spes", "spes_warmup", "spes_int8", "fedavg", "spes_sparse"})
      if (has(name)) print(std::string(name) + "_over_centralized", results.at(name).finalValLoss / central);
    if (has("spes")) {
      const double ratio = results.at("spes").finalValLoss / central;
      printText("spes_over_centralized_verdict", ratio <= 1.02   ? "goal met (<= 1.02)"
                                                 : ratio <= 1.05 ? "acceptable (<= 1.05, goal 1.02 missed)"
                                                                 : "FAILED (> 1.05)");
    }
    print("optimizer_state_bytes_centralized", double(results.at("centralized").optimizerStateBytesPerPeer), 0);
  }
  if (has("spes") && has("spes_int8")) {
    const double f32 = results.at("spes").finalValLoss, int8 = results.at("spes_int8").finalValLoss;
    print("int8_val_loss_penalty_percent", 100.0 * (int8 - f32) / f32, 3, "%");  // goal <= 1%
  }
  if (has("spes_sparse")) {
    const auto& r = results.at("spes_sparse");
    const auto bytes = es::sim::meanContributionBytes(r);
    print("sparse_keep_per_chunk", double(args.sparseKeep), 0);
    print("sparse_chunk", double(args.sparseChunk), 0);
    print("sparse_value_bits", double(args.sparseBits), 0);
    print("feedback_decay", args.feedbackDecay, 3);
    print("bytes_per_peer_per_sync_sparse", bytes.sparse, 0);
    print("sparse_over_f32_bytes", bytes.sparse / bytes.f32, 4);  // goal <= 0.03
    if (has("spes_int8")) {
      const double int8 = results.at("spes_int8").finalValLoss;
      print("sparse_val_loss_penalty_vs_int8_percent", 100.0 * (r.finalValLoss - int8) / int8, 3, "%");  // goal <= 1%
    }
  }
  const char* spesRun = has("spes")          ? "spes"
                        : has("spes_int8")   ? "spes_int8"
                        : has("spes_warmup") ? "spes_warmup"
                                             : nullptr;
  if (spesRun) {
    const auto& r = results.at(spesRun);
    const auto bytes = es::sim::meanContributionBytes(r);
    print("bytes_per_peer_per_sync_f32", bytes.f32, 0);
    print("bytes_per_peer_per_sync_bf16", bytes.bf16, 0);
    print("bytes_per_peer_per_sync_int8", bytes.int8, 0);
    print("bytes_per_peer_per_sync_spes_reference", bytes.spesReference, 0);
    print("int8_over_spes_reference", bytes.int8 / bytes.spesReference, 4);
    print("optimizer_state_bytes_per_peer_spes", double(r.optimizerStateBytesPerPeer), 0);
    if (has("centralized"))
      print("optimizer_state_spes_peer_over_centralized",
            double(r.optimizerStateBytesPerPeer) / double(results.at("centralized").optimizerStateBytesPerPeer), 4);
  }
  if (has("fedavg")) {
    print("bytes_per_peer_per_sync_fedavg_f32", es::sim::meanContributionBytes(results.at("fedavg")).f32, 0);
    print("optimizer_state_bytes_per_peer_fedavg", double(results.at("fedavg").optimizerStateBytesPerPeer), 0);
  }
  double total = 0;
  for (const auto& [name, r] : results) total += r.seconds;
  print("total_seconds", total, 0, "s");
  return 0;
}
