// What the node is told at start: the run's swarm policy as the node uses it, the folders it
// writes, its memory budget. Owned by Node; its parts read it (const).
#pragma once

#include "core/common/ids.h"
#include "core/node/node_reports.h"
#include "core/spes/spes_peer.h"
#include "core/train/run_manifest.h"

#include <QString>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>

namespace es::node {

// The run's swarm policy as the node uses it. Its defaults are train::SwarmPolicy's (the run
// manifest's, the one place they are stated); the engine fills it from the parsed manifest. The
// round's length in steps is the trainer's alone (SpesPeerConfig::syncEvery): the node never reads it.
struct RoundPolicy {
  int expertsPerPeer = train::SwarmPolicy{}.expertsPerPeer;
  int leaseRounds = train::SwarmPolicy{}.leaseRounds;
  double deadlineFactor = train::SwarmPolicy{}.deadlineFactor;  // × the median of recent gather times
  double deadlineMinSeconds = train::SwarmPolicy{}.deadlineMinSeconds;
  double deadlineMaxSeconds = train::SwarmPolicy{}.deadlineMaxSeconds;
  int joinWindowMs = 3000;                                 // listen for peers before claiming (not in the manifest)
  int snapshotEvery = train::SwarmPolicy{}.snapshotEvery;  // rounds between merged-state snapshots
  std::set<PeerId> anchors;                                // peers whose votes weigh the cap (standing.h)
};

struct NodeConfig {
  std::string runName;
  SpesPeerConfig peer;  // localExperts are chosen by the node
  RoundPolicy policy;
  int nExperts = 8;
  qint64 maxRounds = 0;  // 0 = run until stopped
  int maxExperts = 0;    // pre-flight memory budget (0 = no limit); see expertBudget()
  QString contribDir;    // our contributions
  QString fetchDir;      // others' contributions
  QString snapshotDir;   // our snapshots
  // Disk quota of the run folder (0: none): no fetch starts that could take the folder past it
  // (node_fetch.cpp). runDir is the folder measured (empty: the parent of fetchDir).
  std::int64_t diskQuotaBytes = 0;
  QString runDir;
  // Reads the GPU we train on (the engine wires NVML here when the device is a GPU); null or
  // nullopt: no reading. Called on the node's thread, at most once per Node::kGpuReadingMs.
  std::function<std::optional<GpuReading>()> readGpu;
};

}  // namespace es::node
