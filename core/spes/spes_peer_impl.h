// SpesPeer's private parts, shared by its source files (spes_peer.cpp: training, merging,
// snapshots; spes_peer_repair.cpp: merging a round again with the majority's set;
// spes_peer_feedback.cpp: a sparse run's error feedback; spes_peer_sharded.cpp: a sharded round).
// Not part of the interface: only those include it.
#pragma once

#include "core/checkpoint/round_dirs.h"
#include "core/checkpoint/safetensors.h"
#include "core/checkpoint/training_state.h"
#include "core/spes/spes_peer.h"
#include "core/sync/outer_step.h"
#include "core/sync/round_merge.h"
#include "core/sync/sparse_codec.h"
#include "core/sync/swarm_state.h"
#include "core/sync/validate.h"
#include "core/train/trainer.h"
#include "core/train/trainer_weights.h"

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <thread>

namespace es::node::peer_detail {

using ckpt::NamedTensors;

extern const char* const kStateFile;
extern const char* const kBaseFile;
extern const char* const kFeedbackFile;  // a sparse run's residual (absent: none yet)

Expected<NamedTensors> inOrder(const NamedTensors& order, const ckpt::SafetensorsFile& file);
std::string unfitSnapshotTensor(const NamedTensors& base, const NamedTensors& ordered);
NamedTensors sharedOnly(const NamedTensors& tensors);
void poison(NamedTensors& deltas, const std::string& kind, const train::TrainerOptions& options,
            const NamedTensors& weights, const sync::UpdateCeiling& ceiling);
std::vector<sync::RoundEntry> readEntries(const std::vector<IncomingContribution>& incoming, const NamedTensors& base,
                                          std::vector<ContributionVerdict>& verdicts,
                                          std::map<std::string, std::int64_t>& bytesOf);
sync::RoundPolicy roundPolicy(const SpesPeerConfig& config);
// The policy a merge of `round` runs under: roundPolicy, and the contributions held to what the
// run's optimizer can move in that round's steps (sync/update_ceiling.h).
sync::RoundPolicy mergePolicy(const SpesPeerConfig& config, std::int64_t round);
// The outer rule's momentum stored beside `base` in `file` (a round folder's base, a snapshot):
// empty for a plain rule or a round-0 state; an error when one is missing, not float32, not
// finite or of another shape.
Expected<NamedTensors> momentumIn(const ckpt::SafetensorsFile& file, const NamedTensors& base,
                                  const sync::OuterRule& rule, std::int64_t round);

}  // namespace es::node::peer_detail

namespace es::node {

struct SpesPeer::Impl {
  using NamedTensors = ckpt::NamedTensors;
  SpesPeerConfig config;
  std::unique_ptr<train::Trainer> trainer;
  NamedTensors base;      // the last merged state (every tensor, trainer order)
  NamedTensors snapshot;  // local weights when the pending contribution was written
  std::int64_t baseRound = 0;
  // The base before the last merge (round baseRound − 1): a round merged into another state than
  // the majority's is merged again from it (SpesPeer::remerge). Empty after a resume or a snapshot.
  NamedTensors previousBase;
  // The outer rule's momentum that goes with `base` and with `previousBase` (empty: a plain rule,
  // or zeros before the first merge).
  NamedTensors momentum, previousMomentum;
  // The work ledger that goes with `base` and with `previousBase` (sync/work_ledger.h: who the
  // swarm merged, how often — what weighs each sender in the next merge).
  sync::WorkLedger ledger, previousLedger;
  bool resumed = false;
  std::shared_ptr<const std::vector<std::uint16_t>> trainTokens, valTokens;
  // A sparse run's error feedback (sync/sparse_codec.h; spes_peer_feedback.cpp): what this peer
  // has not sent yet. Training state: persisted in each round folder with the trainer's state
  // (captured at the same moment), restored on resume, dropped when a snapshot is adopted (it
  // held movement of a state we left). `beforePending`: its value before the pending
  // contribution was written — a rewrite on a remerged base (SpesPeer::remerge) starts from it,
  // so the unsent movement is not counted twice.
  std::optional<sync::ErrorFeedback> feedback;
  std::map<std::string, at::Tensor> beforePending;
  std::optional<sync::SparseSpec> sparse;  // the run's sparse codec, when it has one

  // Sparse runs: what goes into the contribution of `round` — deltas plus the residual, each
  // weight held to the sparse ceiling (validate.h), encoded once — and the residual becomes what
  // that file does not carry. `rewrite`: the pending contribution written again (from beforePending).
  struct SparseSend {
    NamedTensors held;     // what was encoded (the test poisons start from it)
    NamedTensors encoded;  // the file's tensors (sync::encodeContribution of `held`)
  };
  Expected<SparseSend> feedBack(std::int64_t round, const NamedTensors& deltas, bool rewrite);
  Expected<std::map<std::string, at::Tensor>> readFeedback(const std::string& dir) const;
  static Status saveFeedback(const std::string& dir, std::int64_t round,
                             const std::map<std::string, at::Tensor>& residual);

  // State after the merge of round N lives in <stateDir>/round-N (core/checkpoint/round_dirs.h: a kill
  // at any moment leaves a complete round; the one before the newest is kept as its fallback).
  std::string resumeNote;  // rounds passed over at load because they were damaged

  // Written on a background thread from private copies, so training goes on meanwhile; the
  // callback reports when round-N/ is durable (only then may the round be committed elsewhere).
  std::thread writer;
  std::function<void(std::int64_t, std::string)> onPersisted;

  // What the swarm compares: the base, the outer momentum and the work ledger (sync::withState).
  std::string fingerprint() const { return sync::swarmFingerprint(base, momentum, ledger); }

  // A round's merge taken as the new state (merge, applyShards): the verdicts into `result` (with
  // each sender's bytes), the validation loss and sample when `evaluate`, merged + (local now −
  // snapshot) into the trainer, base/momentum/ledger moved on (the old ones kept for a remerge),
  // and the state written in the background.
  Expected<MergeResult> adoptMerge(sync::RoundMerge outcome, MergeResult result,
                                   const std::map<std::string, std::int64_t>& bytesOf, bool evaluate);

  // snapshot − base over the trainable tensors: what the pending contribution carries.
  NamedTensors pendingDeltas() const;
  // The pending contribution (pendingDeltas) written to `path`.
  Expected<ContributionWritten> writePending(std::int64_t round, const std::string& path, bool rewrite = false);

  void persist() {
    if (writer.joinable()) writer.join();  // one write at a time, in order
    if (config.stateDir.empty()) {
      if (onPersisted) onPersisted(baseRound, {});
      return;
    }
    writer = std::thread([dir = config.stateDir, round = baseRound, base = sync::withState(base, momentum, ledger),
                          state = train::captureTrainingState(*trainer), done = onPersisted,
                          residual = feedback ? feedback->residual() : std::map<std::string, at::Tensor>{}]() mutable {
      const auto status = writeRoundDir(dir, round, base, state, residual);
      if (done) done(round, status ? std::string() : status.error());
    });
  }

  static Status writeRoundDir(const std::string& stateDir, std::int64_t round, const NamedTensors& base,
                              const ckpt::TrainingState& state, const std::map<std::string, at::Tensor>& residual) {
    return round_dirs::commit(stateDir, round, [&](const std::string& dir) -> Status {
      if (auto s = ckpt::saveSafetensors(dir + "/" + peer_detail::kBaseFile, base, {{"round", std::to_string(round)}});
          !s)
        return s;
      if (auto s = saveFeedback(dir, round, residual); !s) return s;
      return ckpt::saveTrainingState(dir + "/" + peer_detail::kStateFile, state);
    });
  }

  ~Impl() {
    if (writer.joinable()) writer.join();
  }

  Status load() {
    if (config.stateDir.empty() || !std::filesystem::exists(config.stateDir)) return {};
    std::vector<std::string> skipped;
    auto loaded = round_dirs::loadNewest(
        config.stateDir, [this](const round_dirs::RoundDir& dir) { return loadRoundDir(dir); }, skipped);
    for (const auto& line : skipped) resumeNote += (resumeNote.empty() ? "" : "; ") + line;
    if (!loaded) return makeError(loaded.error());
    if (!*loaded) return {};
    baseRound = **loaded;
    resumed = true;
    return {};
  }

  // One round folder; the base and the trainer change only when both files are whole and agree.
  Status loadRoundDir(const round_dirs::RoundDir& dir) {
    auto file = ckpt::loadSafetensors(dir.path + "/" + peer_detail::kBaseFile);
    if (!file) return makeError(file.error());
    const auto round = file->metadata.find("round");
    if (round == file->metadata.end() || round->second != std::to_string(dir.round))
      return makeError("its base does not say the folder's round");
    auto ordered = peer_detail::inOrder(base, *file);
    if (!ordered) return makeError(ordered.error());
    auto stored = peer_detail::momentumIn(*file, base, peer_detail::roundPolicy(config).outer, dir.round);
    if (!stored) return makeError(stored.error());
    auto storedLedger = sync::ledgerIn(*file, dir.round);
    if (!storedLedger) return makeError(storedLedger.error());
    auto residual = readFeedback(dir.path);
    if (!residual) return makeError(residual.error());
    if (auto s = trainer->loadState(dir.path + "/" + peer_detail::kStateFile); !s) return s;
    if (feedback) feedback->setResidual(std::move(*residual));
    base = std::move(*ordered);
    momentum = std::move(*stored);
    ledger = std::move(*storedLedger);
    return {};
  }
};

}  // namespace es::node
