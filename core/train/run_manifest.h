// A run's manifest (run.json): everything peers of one run must agree on — the model, the
// optimizer and schedule, the data recipe, the seed, and the swarm policy.
//
// A run joined by magnet link hands us a stranger's manifest, so this is the one place that
// decides what a manifest may ask for (ISSUE 14):
// - `name` is [A-Za-z0-9._-]{1,64}, never "." or ".."; it is a label, the run folder is keyed by
//   the run id (app/run_setup.cpp).
// - corpus paths are relative, without "..", and must resolve (symlinks followed) to regular files
//   inside the run's source folder or the bundled corpus folder, kMaxCorpusBytes in all
//   (checkCorpusFiles, called before anything is created or read).
// - every number is bounded (zero, negative and huge values are refused) so a manifest cannot
//   make a peer allocate terabytes or spin; unknown keys and wrong types are errors.
// Every error names the field: `run manifest: swarm.deadline.min_seconds: must be …, got -5`.
#pragma once

#include "core/common/expected.h"
#include "core/model/model_config.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace es::train {

// 256 MiB of text: 25× the bundled corpus, and the whole corpus is held in memory (several times,
// while tokenizing), so more would be a denial of service on a donor's machine rather than a run.
constexpr std::int64_t kMaxCorpusBytes = std::int64_t(256) << 20;
// Tokens per optimizer step (batch_size × seq_len): 64× the bundled run. The logits of one step
// alone are tokens × vocab × 4 bytes (32 GiB at the largest vocabulary).
constexpr std::int64_t kMaxTokensPerStep = std::int64_t(1) << 17;

struct TrainConfig {
  int batchSize = 8;        // sequences per step (each seq_len tokens)
  double lr = 2e-3;         // peak learning rate
  double minLrRatio = 0.1;  // cosine floor as a fraction of lr
  std::int64_t warmupSteps = 50;
  std::int64_t totalSteps = 5000;  // length of the cosine schedule and of SPES's 20% ramp
  double weightDecay = 0.1;        // on matrices only, never on norm weights
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double gradClip = 1.0;
  double loadBalanceCoef = 0.01;
  double zLossCoef = 0.001;
  int logInterval = 10;
  int evalInterval = 100;
  int evalBatches = 8;           // validation slice = the first eval_batches·batch_size windows
  int checkpointInterval = 100;  // steps between durable training-state saves
};

// A run made by `expertswarm create-run` (core/train/run_create.h) carries its data already
// tokenized, in the run torrent beside run.json: tokenizer.json, data/val.bin and
// data/train-NNN.bin (token_shard.h), listed here by token count — the file sizes follow
// (16 + 2 × tokens), so a torrent whose files disagree is refused before a shard is fetched. The
// bytes themselves are fixed by the run id: the v2 info-hash of the whole run folder commits to
// every file's merkle root, so run.json carries no hash of its own (it could not name the torrent
// it is part of).
constexpr int kMaxPreparedShards = 4096;
constexpr std::int64_t kMaxShardTokens = std::int64_t(1) << 28;  // 512 MiB a shard
// Every peer still loads every shard it holds into memory (loadRunData), and a joiner fetches
// them all until shards are assigned per peer: 1 GiB of tokens in all (~2 GiB of text).
constexpr std::int64_t kMaxPreparedTrainTokens = std::int64_t(1) << 29;
constexpr std::int64_t kMaxTokenizerBytes = std::int64_t(16) << 20;

struct DataConfig {
  std::vector<std::string> trainCorpus;  // text files, relative to the run's source folder
  std::string valCorpus;
  std::int64_t shardTokens = 1 << 20;  // tokens per train-NNN.bin shard
  // "prepared": tokens in each data/train-NNN.bin and in data/val.bin (empty = a text corpus).
  std::vector<std::int64_t> preparedTrainTokens;
  std::int64_t preparedValTokens = 0;
  bool prepared() const { return !preparedTrainTokens.empty(); }
};

// The "swarm" object: every key the node reads, with its default. These are the only defaults:
// node::RoundPolicy and node::SpesPeerConfig start from a default SwarmPolicy.
struct SwarmPolicy {
  int syncEvery = 50;           // steps per round
  int expertsPerPeer = 2;       // claim size (at most model.n_experts)
  int leaseRounds = 3;          // a claim lapses after this many rounds without a record
  int snapshotEvery = 2;        // rounds between merged-state snapshots (newcomers, resync)
  double deadlineFactor = 1.5;  // × the median of recent gather times
  double deadlineMinSeconds = 30;
  double deadlineMaxSeconds = 600;
  // Contribution codec: "f32", "bf16", "int8" (sync::parseCodec) or "sparse" (issue 39: per
  // chunk of sparse.chunk elements the sparse.keep largest, with error feedback decaying by
  // sparse.feedback_decay a round; core/sync/sparse_codec.h). contributionCodec() is the name
  // a contribution's header carries.
  std::string compression = "int8";
  std::int64_t sparseKeep = 128;
  std::int64_t sparseChunk = 4096;
  double feedbackDecay = 0.9;  // best of 0.8, 0.9, 0.95 and none (docs/PERFORMANCE.md, "Sparse contributions")
  // sync::sparseCodecName's format ("sparse/<keep>/<chunk>"; this library cannot link es_sync,
  // tst_run_manifest holds the two to one text).
  std::string contributionCodec() const {
    return compression == "sparse" ? "sparse/" + std::to_string(sparseKeep) + "/" + std::to_string(sparseChunk)
                                   : compression;
  }
  // Merging warm-up (merge_warmup): alpha0 0 = off.
  std::int64_t warmupInterval = 50;
  double warmupAlpha0 = 0.0;
  std::int64_t warmupDecaySteps = 1000;
  int warmupTopk = 4;
  // Shared-tensor aggregate (aggregate): "mean" or "centered_clip" (sync::parseSharedRule), with
  // centered clipping's iterations and τ factor (core/sync/robust_aggregate.h). Absent = these.
  // centered_clip by default: with honest peers only it cost −0.008 % and +0.25 % val loss against
  // the mean over two seeds (bench/robust_merge_cost, docs/PERFORMANCE.md; ≤ 0.5 % allowed), and
  // it is what stops a reversed update that stays inside the norm bounds. NB: a client from before this field merges
  // with the mean, so old and new clients in one run compute different merged states.
  std::string aggregate = "centered_clip";
  int clipIterations = 3;
  double clipTauFactor = 1.0;
  // DiLoCo's outer Nesterov step on each round's merged delta (outer_step; core/sync/outer_step.h):
  // lr 1 and momentum 0 (absent) = SPES's plain merge. "on": "shared", "experts" or "all".
  double outerLr = 1.0;
  double outerMomentum = 0.0;
  std::string outerOn = "shared";
  // The proof of work every peer's key must carry (p2p/identity_work.h): 2^bits hashes, once per
  // key. 22 (absent from the bundled run, which keeps its run id): ~0.7 s on one core here, and a
  // flood of 20,000 fresh keys ~4 CPU-hours instead of 1 s of key pairs. At most 30 (~3 min).
  int identityWorkBits = 22;
  // Issue 38's sharded reduction (reduction: replicas, audits, shard_from; core/sync/round_topology.h's
  // ReductionPolicy — this library cannot link es_sync): reducers per shard, shards each peer
  // audits a round, and the senders with merged work to shard from (0, absent: where the byte
  // model says it pays). Not run by the node yet.
  int reductionReplicas = 3;
  int reductionAudits = 1;
  int shardFrom = 0;
  // Peers the run's author vouches for (peer ids, 40 hex digits; at most 16): their votes weigh as
  // much as the longest-standing peer's from the start, for a newcomer too (core/node/rules/standing.h).
  std::vector<std::string> anchors;
  // Accepted (the bundled run names it, and changing that run.json would change its run id) and
  // bounded, but not read by the node yet: a round closes on all contributions or the deadline.
  double quorum = 1.0;
};

struct RunManifest {
  std::string name;
  std::uint64_t seed = 1234;
  model::ModelConfig model;
  TrainConfig train;
  DataConfig data;
  SwarmPolicy swarm;
};

// The most a run.json may weigh. The bundled one is 1,106 bytes: every field is a number or a
// short string, the corpus list the only list (a relative path per file). 64 KiB is ~60× that,
// room for hundreds of corpus files, and costs nothing to read whole and parse; a manifest
// fetched from strangers (joining by magnet) is refused above it before a byte of it is fetched.
constexpr std::int64_t kMaxRunManifestBytes = 64 * 1024;

// Strict: unknown keys, wrong types and out-of-range values are errors naming the key.
Expected<RunManifest> parseRunManifest(std::string_view json);
// A run.json's bytes, read only up to kMaxRunManifestBytes (a larger file is an error).
Expected<std::string> readRunManifestText(const std::string& path);
Expected<RunManifest> loadRunManifest(const std::string& path);

// [A-Za-z0-9._-]{1,64}, not "." or "..": safe as one path component anywhere.
bool isValidRunName(std::string_view name);

// The corpus files of `manifest` on disk: each resolves (symlinks followed) to a regular file
// inside `sourceDir` or `alsoAllowedDir` (the bundled corpus a run folder may link to; empty =
// none), kMaxCorpusBytes in all. Only stat()s: a FIFO or device is refused without being opened.
Status checkCorpusFiles(const RunManifest& manifest, const std::string& sourceDir, const std::string& alsoAllowedDir);

// Learning rate at `step` (0-based): linear warmup to lr, then cosine down to lr·minLrRatio at
// totalSteps, flat afterwards.
double learningRateAt(const TrainConfig& config, std::int64_t step);

// SPES: the load-balancing weight of a peer's local experts ramps linearly from 0.7 to 1.0 over
// the first 20% of the run's steps (reference: zjr2000/SPES), 1.0 after.
double localExpertBalanceFactor(std::int64_t step, std::int64_t totalSteps);

}  // namespace es::train
