// A simulated SPES swarm: P virtual peers in one process on the bundled corpus, merged through
// the same es_sync path as the real client (encodeDeltas → decodeDeltas, validateRound,
// aggregate, merging warm-up), plus the same-compute baselines of issue 3 (centralized training
// with P× the batch; FedAvg/DiLoCo with every peer training every expert).
//
// Peers run one after another in the calling thread; the thread count is the caller's business
// (train::configureTrainingRuntime). Torch types appear here: keep this header out of moc.
#pragma once

#include "core/common/expected.h"
#include "core/model/model_config.h"
#include "core/sync/delta_codec.h"
#include "core/sync/merge.h"
#include "core/sync/outer_step.h"
#include "core/sync/sparse_codec.h"
#include "core/train/corpus_prep.h"
#include "core/train/run_manifest.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace es::sim {

enum class Strategy {
  Spes,         // each peer trains shared tensors + its claimed experts; sparse merge
  FedAvg,       // each peer trains everything; every tensor averaged at every merge
  Centralized,  // one trainer, all experts, batch = peers × per-peer batch, no merges
};
std::string strategyName(Strategy strategy);  // "spes", "fedavg", "centralized"

struct SimConfig {
  int peers = 4;
  int syncEvery = 20;                    // H: local steps between merges (a last merge closes a partial round)
  int steps = 240;                       // steps of every peer, and of the centralized trainer
  int expertsPerPeer = 0;                // k; 0 = nExperts / peers (at least 1). P·k > E gives replicas.
  std::vector<std::vector<int>> claims;  // explicit claims per peer; overrides expertsPerPeer
  sync::Codec codec = sync::Codec::F32;  // how contributions travel
  // When keep > 0: contributions travel sparse (core/sync/sparse_codec.h) with each peer's error
  // feedback, in memory (the client writes them to files; the simulator need not); `codec` is then unused.
  sync::SparseSpec sparse{4096, 0};
  // The rounds a weight's unsent movement may wait in a sparse sender's residual: a sent value is
  // held to (and validated against) the update ceiling of that many rounds' steps. 0: the client's
  // rule, sync::sparseWaitRounds (floor √(chunk / keep)); another value is an experiment.
  int sparseWaitRounds = 0;
  // Each shared element of sparse contributions averaged over the senders that sent it
  // (SparseLoCo's scatter-mean: AggregatePolicy::scatterMean, what a sparse run's merge does).
  bool sparseMean = false;
  double feedbackDecay = 1.0;  // the error feedback's decay (a sparse run's swarm.sparse.feedback_decay), 1 = none
  bool warmup = false;         // SPES merging warm-up after the aggregate
  sync::WarmupConfig warmupConfig;
  sync::AggregatePolicy aggregate;  // shared-tensor rule: mean (default here; the client's
                                    // run default is centered clipping) or centered clipping
  model::ModelConfig model;
  train::TrainConfig train;       // per peer; the centralized trainer uses batchSize × peers
  std::uint64_t seed = 1234;      // model initialisation: identical on every peer
  std::uint64_t dataSeed = 1234;  // peer i samples its shard with dataSeed + i
  // Each peer's disjoint share of the train tokens: 0 = contiguous parts. The bundled corpus is
  // chronological (1790–2021), so contiguous parts give each peer one era (non-IID peers);
  // > 0 deals blocks of this many tokens round-robin, so every peer sees every era.
  std::size_t shardBlockTokens = 0;
  // Batch of the centralized baseline; 0 = batchSize × peers (the same tokens per step as all peers
  // together). SPES's reference runs give every node the centralized batch: set it to batchSize.
  int centralBatch = 0;
  // Validation windows, spread evenly over the whole validation set; 0 = evalBatches × batchSize.
  int evalWindows = 0;
  int evalEvery = 0;  // steps between validation points, a multiple of syncEvery
                      // (validation follows a merge); 0 = every merge. Always at the end.
  // The outer step on each round's merged delta (core/sync/outer_step.h): DiLoCo's Nesterov
  // step; the default is plain, the client's rule unless its run names another.
  sync::OuterRule outer;
  // When set, every contribution round-trips through a contribution file in this folder
  // (saveContribution/loadContribution), as it would between real peers.
  std::string contributionDir;
};

struct CurvePoint {
  std::int64_t step = 0;
  double valLoss = 0;    // the merged model (SPES/FedAvg) or the one trainer (centralized)
  double trainLoss = 0;  // mean batch loss over peers and the steps since the previous point
};

// One peer's contribution of one round, encoded with each codec (payload bytes, encodedBytes).
struct ContributionBytes {
  int round = 0;
  int peer = 0;
  std::int64_t f32 = 0, bf16 = 0, int8 = 0;
  std::int64_t sparse = 0;         // with SimConfig::sparse.keep > 0
  std::int64_t spesReference = 0;  // f32 full weights of the trainable tensors (what SPES's server receives)
};

// Handed to the observer after each merge, once every peer holds the merged state.
struct MergeRecord {
  int round = 0;                                         // 1-based
  std::int64_t step = 0;                                 // steps done by every peer
  double alpha = 0;                                      // warm-up factor applied (0: none)
  const ckpt::NamedTensors& base;                        // the previous merged state
  const std::vector<ckpt::NamedTensors>& local;          // each peer's weights just before the merge
  const std::vector<sync::Contribution>& contributions;  // decoded and accepted, sender order
  const std::vector<std::vector<int>>& claims;           // per peer
  const sync::Ownership& owners;
  const ckpt::NamedTensors& merged;    // what every peer holds now
  const ckpt::NamedTensors& momentum;  // the outer rule's momentum every peer holds now (empty: plain)
};
using MergeObserver = std::function<void(const MergeRecord&)>;

struct SimResult {
  Strategy strategy = Strategy::Spes;
  double initialValLoss = 0;
  double finalValLoss = 0;
  std::vector<CurvePoint> curve;                // starts with step 0
  std::vector<ContributionBytes> bytes;         // per round per peer (empty for centralized)
  std::int64_t optimizerStateBytesPerPeer = 0;  // the largest peer's (the trainer's, centralized)
  std::int64_t tokensTrained = 0;               // over all peers
  int merges = 0;
  int warmupMerges = 0;           // merges with alpha > 0
  int rejectedContributions = 0;  // by validateRound (never expected here)
  // Accepted but not credited in the work ledger (sync/work_credit.h), and the lowest agreement of
  // an accepted contribution with its merge: how far honest work sits above the credit's bar.
  int uncreditedContributions = 0;
  double lowestAgreement = 1.0;
  bool peersIdenticalAfterEveryMerge = true;
  double seconds = 0;
};

struct MeanBytes {
  double f32 = 0, bf16 = 0, int8 = 0, spesReference = 0;
  double sparse = 0;  // 0 unless the run's contributions were sparse
};
MeanBytes meanContributionBytes(const SimResult& result);  // per peer per sync

// Claims for SPES: peer i gets experts (i·k + j) mod E, j < k. Disjoint contiguous blocks when
// P·k ≤ E; wrapping around gives replicas when P·k > E (every expert owned when P·k ≥ E).
std::vector<std::vector<int>> assignExperts(int peers, int nExperts, int expertsPerPeer);

// `parts` disjoint shards of `tokens`. blockTokens = 0: contiguous (shard i is the i-th part, the
// last takes the remainder); > 0: blocks of that many tokens dealt round-robin.
std::vector<train::TokenBuffer> splitTokens(const train::TokenBuffer& tokens, int parts, std::size_t blockTokens = 0);

// Runs one strategy from the same initial weights; errors are configuration or codec failures.
Expected<SimResult> runSimulation(Strategy strategy, const SimConfig& config, const train::RunData& data,
                                  const train::LogFn& log, const MergeObserver& observer = {});

}  // namespace es::sim
