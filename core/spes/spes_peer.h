// One peer's side of SPES rounds, on the trainer thread: the trainer plus the round bookkeeping —
// the base (the last merged state every peer holds), the contribution written at a round's end,
// and the merge that folds in everyone's contributions while keeping the local progress made
// since (docs/ARCHITECTURE.md, "Swarm protocol", Round close: merged + (local now − local at the
// snapshot)).
// Torch-free header (pimpl): the Qt side includes it; the Torch code stays in spes_peer.cpp.
#pragma once

#include "core/common/expected.h"
#include "core/common/ids.h"
#include "core/node/node_reports.h"
#include "core/sync/outer_rule.h"
#include "core/sync/round_topology.h"
#include "core/train/bpe_tokenizer.h"
#include "core/train/run_manifest.h"
#include "core/train/trainer.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace es::node {

struct ContributionWritten {
  std::int64_t round = 0;
  std::string path;
  std::string baseHash;
  std::int64_t bytes = 0;
};

struct IncomingContribution {
  PeerId sender;
  std::string path;      // a contribution file (core/sync/contribution_file.h)
  std::set<int> claims;  // the experts the sender's signed record claims
};

// What SpesPeer::remerge did: the round's new state, and the contribution written again on it
// (round 0 when none was pending).
struct Remerged {
  std::int64_t round = 0;
  std::string fingerprint;
  std::string sharedFingerprint;  // of its shared tensors (what the ledger's round row names)
  int accepted = 0;
  ContributionWritten rewritten;
};

// Issue 38: a sharded round as the trainer thread sees it (core/sync/sharded_merge.h). The
// senders' folders hold their figures file and the shard files this peer fetched of them.
struct ShardedSenderFiles {
  PeerId sender;
  std::string folder;
  std::set<int> claims;  // its record's for the round
};
struct ShardedRoundSpec {
  std::int64_t round = 0;
  std::int64_t shardElements = 0;           // the plan's shard size (sync::shardElementsFor)
  std::vector<ShardedSenderFiles> senders;  // the round's input set
  std::set<PeerId> out;                     // refused by an earlier pass (shard_refusals.h)
  std::string inputDigest;                  // of the set without them
};
// Shard id → the senders its merged file names refused (a pass that refused someone: another pass
// follows, shard_refusals.h).
using ShardRefusals = std::map<std::string, std::set<std::string>>;
// One shard this peer reduced: its merged-shard file and whom it refused there.
struct ReducedShard {
  std::string shard;
  std::string path;
  std::set<PeerId> refused;
};

struct SpesPeerConfig {
  train::TrainerOptions trainer;
  std::string runId;
  std::string selfId;
  // Defaults: the run manifest's (train::SwarmPolicy); the engine sets them from the manifest.
  // The run's contribution codec as a header names it (train::SwarmPolicy::contributionCodec):
  // "f32", "bf16", "int8" or "sparse/<keep>/<chunk>", whose error feedback decays by feedbackDecay.
  std::string codec = train::SwarmPolicy{}.contributionCodec();
  double feedbackDecay = train::SwarmPolicy{}.feedbackDecay;
  int syncEvery = train::SwarmPolicy{}.syncEvery;
  // Merging warm-up (run.json swarm.merge_warmup); alpha0 0 = off.
  std::int64_t warmupInterval = train::SwarmPolicy{}.warmupInterval;
  double warmupAlpha0 = train::SwarmPolicy{}.warmupAlpha0;
  std::int64_t warmupDecaySteps = train::SwarmPolicy{}.warmupDecaySteps;
  int warmupTopk = train::SwarmPolicy{}.warmupTopk;
  // Shared-tensor aggregate (run.json swarm.aggregate): "mean" or "centered_clip".
  std::string aggregate = train::SwarmPolicy{}.aggregate;
  int clipIterations = train::SwarmPolicy{}.clipIterations;
  double clipTauFactor = train::SwarmPolicy{}.clipTauFactor;
  // The outer Nesterov step (run.json swarm.outer_step; core/sync/outer_step.h): lr 1 and
  // momentum 0 = the plain merge. Its momentum is part of the state: fingerprinted, persisted and
  // in snapshots.
  sync::OuterRule outer;
  // Issue 38's sharded reduction (run.json swarm.reduction): what nextTopology decides with.
  sync::ReductionPolicy reduction;
  std::string stateDir;  // training state + base, written after every merge
  // Decodes the merged model's sample on eval rounds (MergeResult::sample); none: no samples.
  std::shared_ptr<const train::BpeTokenizer> tokenizer;
  // Test only: "nan", "norm" (×10⁶), "foreign" (an unclaimed expert), "zero" (no work) or "expert"
  // (every expert weight moved 0.8 × the update ceiling) poisons every contribution.
  std::string testPoison;
};

class SpesPeer {
 public:
  // Resumes from stateDir when it holds a complete state.
  static Expected<std::unique_ptr<SpesPeer>> create(const SpesPeerConfig& config,
                                                    std::shared_ptr<const std::vector<std::uint16_t>> train,
                                                    std::shared_ptr<const std::vector<std::uint16_t>> val);
  ~SpesPeer();

  train::StepStats step();
  double evaluate();
  std::int64_t stepCount() const;
  std::int64_t mergedRound() const;  // the round the base comes from (0 = initial weights)
  bool resumed() const;
  // Damaged round folders passed over when resuming ("" when none): the user should hear of it.
  std::string resumeNote() const;
  std::string baseSharedFingerprint() const;  // of the base's shared tensors
  std::string baseFingerprint() const;        // of the whole base and the outer momentum (what the swarm compares)

  // The deltas of the trainable tensors against the base, encoded with the run's codec, written
  // atomically to `path`; remembers the local weights as the snapshot of this round.
  Expected<ContributionWritten> writeContribution(std::int64_t round, const std::string& path);

  // Validates and merges round `round`'s contributions (our own included) into the base, adopts
  // merged + (local now − snapshot), starts writing state + base, and reports every verdict.
  // `evaluate`: also measure the validation loss of the merged state (MergeResult::valLoss).
  Expected<MergeResult> merge(std::int64_t round, const std::vector<IncomingContribution>& contributions,
                              bool evaluate = false);
  // Merges round `round` again from the base it was merged from, with `contributions` (the set
  // the majority merged: a deadline gave us another set) — kept only if the result's fingerprint
  // is `expectedFingerprint`, else nothing changes. The progress made since our first merge of the
  // round moves onto the new state; a contribution written meanwhile (of round + 1) is written
  // again to `rewritePath` on the new base (same deltas) and returned, to be announced instead.
  Expected<Remerged> remerge(std::int64_t round, const std::vector<IncomingContribution>& contributions,
                             const std::string& expectedFingerprint, const std::string& rewritePath);
  // Issue 38, a sharded round (the node does not run one yet). writeShardedContribution: the
  // pending contribution as a folder of shard files and its figures file (shard_file.h) for the
  // plan of `shardElements`, in the run's codec — a dense one (a sparse codec's error feedback is
  // per tensor, not per piece: refused). reduceShards: the merged-shard files of `shards` (plan
  // ids) in `outputDir`, each sender checked against its signed figures there. applyShards: the
  // round's new state from one merged-shard file per shard (plan order, a pass that refused
  // nobody), taken as merge() takes its result.
  Expected<ContributionWritten> writeShardedContribution(std::int64_t round, const std::string& folder,
                                                         std::int64_t shardElements);
  Expected<std::vector<ReducedShard>> reduceShards(const ShardedRoundSpec& spec, const std::vector<std::string>& shards,
                                                   const std::string& outputDir);
  // A merged file that names refused senders is not final: applyShards then fills `refusals` (when
  // given) with every shard's and changes nothing.
  Expected<MergeResult> applyShards(const ShardedRoundSpec& spec, const std::vector<std::string>& mergedPaths,
                                    bool evaluate = false, ShardRefusals* refusals = nullptr);
  // How round mergedRound() + 1 is reduced, from this peer's agreed state alone
  // (sync/round_topology.h): its work ledger's senders with merged work, the model, the run's
  // codec, and its fingerprint as the reducers' seed — so every peer that merged the same set
  // derives the same plan and orders. `owners` (expert → peer ids) are their experts' reducers
  // first.
  sync::RoundTopology nextTopology(const std::map<int, std::set<std::string>>& owners,
                                   const sync::ReductionPolicy& policy) const;
  // Rounds whose merge is evaluated: the first, and each that crosses a multiple of the run's
  // eval interval (in steps). Decided by the round alone, so every peer evaluates the same rounds.
  static bool isEvalRound(std::int64_t round, std::int64_t syncEvery, std::int64_t evalInterval);

  // The merged state of the last round as a snapshot file for newcomers and peers that fell out
  // of step: identical bytes on every peer that merged the same round, hence the same info-hash.
  Expected<std::string> writeSnapshot(const std::string& dir) const;
  // Takes a snapshot as the new base and weights (optimizer moments kept), at its round's step
  // plus `skipSteps` (the steps of the next round the swarm trained already; fewer than a round).
  // Refused, nothing changed, unless its round is `expectedRound` (what the swarm announced it
  // as; the file's own word is not trusted) and every tensor is float32, finite and shaped as
  // the run's (issue 15, item 1: a far-future NaN snapshot announced by two Sybil keys).
  Expected<std::int64_t> adoptSnapshot(const std::string& path, std::int64_t expectedRound, int skipSteps = 0);

  // The state after each merge (and after adopting a snapshot) is written in the background;
  // `callback` runs on the writer thread once round-N/ is durable (error empty) or failed.
  void setPersistedCallback(std::function<void(std::int64_t round, std::string error)> callback);
  void waitForWrites();

  // Changes the experts this peer trains (a re-claim after churn, or shedding a replica).
  Status setLocalExperts(const std::vector<int>& experts);
  // The training tokens from now on (Trainer::setTrainTokens), kept for later trainers too.
  Status setTrainTokens(std::shared_ptr<const std::vector<std::uint16_t>> tokens);
  std::vector<int> localExperts() const;  // sorted

  Status exportWeights(const std::string& path) const;  // the merged base, safetensors + config

 private:
  SpesPeer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace es::node
