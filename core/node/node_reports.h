// What the node reports about itself and its swarm, as plain structs: they cross threads (trainer →
// engine → UI) and module borders (ui/ sees these, never Torch or libtorrent). No Qt, no Torch, so
// the Torch-only libraries include it too. Qt metatype declarations: node_metatypes.h.
#pragma once

#include "core/common/ids.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace es::node {

// What the GPU this peer trains on was doing, read through NVML (core/gpu) at one instant.
struct GpuReading {
  int utilizationPercent = 0;  // NVML's utilisation over its last sample period
  std::int64_t memoryUsedBytes = 0, memoryTotalBytes = 0;
  int temperatureC = 0;
  double powerWatts = 0;
};

// One optimizer step of this peer.
struct StepReport {
  std::int64_t step = 0;
  double seconds = 0;
  double loss = 0;
  double lr = 0;
  double tokensPerSecond = 0;
  // Read when this report reached the node, at most once a second (Node::kGpuReadingMs): a step
  // without a fresh reading carries none rather than repeating an old one. Never on a CPU.
  std::optional<GpuReading> gpu{};
};

struct ContributionVerdict {
  PeerId sender;
  bool accepted = false;
  bool stale = false;     // built on another base: skipped, not the sender's fault
  std::string staleBase;  // that base's hash, when stale
  std::string reason;
  std::int64_t bytes = 0;
  bool lost = false;    // its file could not be read here: this disk's fault, not judged
  bool noWork = false;  // a vanishing update (sync/validate.h): not merged, not banned
  // Accepted, but these experts' moves were cut to the round's scale (sync/expert_bound.h):
  // expert → the factor (< 1) its delta was merged at.
  std::map<int, double> expertCuts = {};
  // Accepted: its shared delta's cosine with the merged update, and whether that earned it the
  // round in the work ledger (sync/work_credit.h).
  double agreement = 0.0;
  bool credited = false;
  // Out of a sharded round by a shard's reducers: banned only by a peer that checked those bytes.
  bool outByShards = false;
};

// What a merged model writes: the greedy continuation of the run's fixed prompt (merged_sample.h).
struct ModelSample {
  std::string prompt;
  std::string text;  // the continuation only
};

struct MergeResult {
  std::int64_t round = 0;
  std::vector<ContributionVerdict> verdicts;
  int accepted = 0;
  std::string fingerprint;        // of the merged state (identical on every peer that merged the same set)
  std::string sharedFingerprint;  // of the merged shared (non-expert) tensors only
  double alpha = 0;               // merging warm-up applied
  // Validation loss of the merged state itself (before this peer's progress since its
  // contribution is added back): the same on every peer that merged the same set. Only on eval
  // rounds (SpesPeer::isEvalRound); never a value repeated from an earlier round.
  std::optional<double> valLoss;
  // On the same rounds, from the same merged state: what it writes (issue 17 item 4).
  std::optional<ModelSample> sample;
};

// One closed round, as this peer merged it: the facts of its merge (MergeResult's, each kept once
// here) and what the node saw while gathering it. What the node reports, records and shows.
struct RoundSummary {
  std::int64_t round = 0;
  std::int64_t step = 0;          // this peer's step count when the merge landed
  int peers = 0;                  // contributions merged (ours included): MergeResult::accepted
  int expected = 0;               // live peers we waited for (ours included)
  double loss = 0;                // our mean training loss over the round
  std::optional<double> valLoss;  // measured this round (an eval round), else none
  double tokensPerSecond = 0;
  double gatherSeconds = 0;
  bool deadlineHit = false;
  bool repaired = false;            // merged again with the majority's set (Node::roundRepaired)
  std::vector<int> updatedExperts;  // experts that an accepted contribution of an owner changed
  std::vector<ContributionVerdict> verdicts;
  std::string fingerprint;        // of the merged state
  std::string sharedFingerprint;  // of its shared tensors only
  double alpha = 0;               // merging warm-up applied
  std::optional<ModelSample> sample;
  // Everything the session sent and received since it started, read when the round merged (a
  // round's bytes are the difference to the round before; bench/reduction_processes).
  std::int64_t sessionBytesSent = 0, sessionBytesReceived = 0;
};

// A peer of the run as this peer sees it (from its signed record; ourselves included).
struct PeerView {
  std::string id;  // peer id (hex)
  bool self = false;
  bool banned = false;
  std::int64_t round = 0;
  std::vector<int> claims;
  std::int64_t leaseUntil = 0;
  std::int64_t steps = 0;
  double loss = 0;
  double tokensPerSecond = 0;
};

// A checkpoint transfer: one of our contributions/snapshots seeding, or one of another peer's
// being fetched (or seeded on after the fetch).
struct TransferView {
  std::string contentId;  // v2 info-hash (hex)
  std::string peer;       // whose content it is (peer id; ours for uploads), empty if unknown
  std::string kind;       // "contribution" | "snapshot" | "other"
  std::int64_t round = 0;
  bool ours = false;  // we published it (we upload it)
  std::int64_t totalBytes = 0;
  std::int64_t doneBytes = 0;
  std::int64_t uploadedBytes = 0;
  std::int64_t downloadedBytes = 0;
  int connections = 0;
  bool finished = false;
};

// The swarm around this peer, refreshed about once a second for views.
struct SwarmView {
  std::string runId;
  std::string selfId;
  std::int64_t round = 0;  // the round this peer trains
  int nExperts = 0;
  int nLayers = 0;
  bool paused = false;
  std::vector<PeerView> peers;  // ourselves first
  std::vector<TransferView> transfers;
  std::int64_t bytesSent = 0;  // all traffic of the session
  std::int64_t bytesReceived = 0;
  int connections = 0;              // on the run torrent
  std::int64_t diskUsedBytes = 0;   // the run folder, at the last fetch decision
  std::int64_t diskQuotaBytes = 0;  // 0: no quota
  bool diskQuotaReached = false;    // a fetch was held back by the quota this round
};

// The run this peer takes part in, once the engine has started it.
struct RunInfo {
  std::string runName;
  std::string runId;
  std::string selfId;
  std::string ledgerPath;  // the SQLite ledger (views open it read-only for history)
  std::string listen;      // IP:PORT the session listens on
  std::string device;
  int nExperts = 0;
  int nLayers = 0;
  int syncEvery = 0;
  // The run's merge rule (its manifest's "swarm" policy; app/engine_start.cpp's "Merge rule" line).
  std::string aggregate;  // "mean" | "centered_clip"
  double outerLr = 1, outerMomentum = 0;
  std::string outerOn;  // "shared" | "experts" | "all"
};

}  // namespace es::node
