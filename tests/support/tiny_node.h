// Test helper: a Node configuration for in-process nodes over MemorySwarm — a tiny model on the
// bundled corpus, CPU, int8 contributions, every folder under `root`/`name`.
#pragma once

#include "core/node/node.h"
#include "core/spes/spes_peer.h"
#include "core/train/corpus_prep.h"
#include "support/memory_swarm.h"

#include <QDir>
#include <QFile>

#include <set>

namespace es::test {

inline node::NodeConfig tinyNodeConfig(const train::RunData& data, const QString& root, const QString& name) {
  node::NodeConfig c;
  c.runName = "tiny";
  c.nExperts = 4;
  c.policy.expertsPerPeer = 2;
  c.policy.joinWindowMs = 300;
  auto& t = c.peer.trainer;
  t.model = data.manifest.model;
  t.model.dModel = 32;
  t.model.nLayers = 2;
  t.model.nHeads = 2;
  t.model.nExperts = 4;
  t.model.expertHidden = 32;
  t.model.seqLen = 32;
  t.train = data.manifest.train;
  t.train.batchSize = 2;
  t.train.evalBatches = 1;
  t.seed = 7;
  t.device = "cpu";
  c.peer.runId = "tiny-run";
  c.peer.selfId = name.toStdString();
  c.peer.codec = "int8";
  const QDir dir(root);
  c.peer.stateDir = dir.filePath(name + "/state").toStdString();
  c.contribDir = dir.filePath(name + "/contrib");
  c.fetchDir = dir.filePath(name + "/incoming");
  c.snapshotDir = dir.filePath(name + "/snapshots");
  return c;
}

// tinyNodeConfig for a node that runs rounds to `maxRounds` with a snapshot after each, its
// deadline between minSeconds and maxSeconds, and its own data order (`dataSeed`).
inline node::NodeConfig roundingNodeConfig(const train::RunData& data, const QString& root, const QString& name,
                                           int syncEvery, int maxRounds, double minSeconds, double maxSeconds,
                                           std::uint64_t dataSeed) {
  node::NodeConfig c = tinyNodeConfig(data, root, name);
  c.maxRounds = maxRounds;
  c.policy.deadlineMinSeconds = minSeconds;
  c.policy.deadlineMaxSeconds = maxSeconds;
  c.policy.snapshotEvery = 1;
  c.peer.trainer.dataSeed = dataSeed;
  c.peer.syncEvery = syncEvery;
  return c;
}

// The bundled default run prepared into `runDir` and loaded: the data every tiny node trains on.
inline Expected<train::RunData> bundledRunData(const QString& runDir) {
  if (auto s = train::prepareRunData(ES_SHARE_DIR "/runs/sotu-text", runDir.toStdString(), [](const std::string&) {});
      !s)
    return makeError(s.error());
  return train::loadRunData(runDir.toStdString());
}

// Trains `steps` steps of `peer` and writes its round-`round` contribution into `dir` as
// <name>-round-<round>.safetensors; → what a merge is given of it.
inline node::IncomingContribution trainRound(node::SpesPeer& peer, const QString& dir, const QString& name,
                                             std::int64_t round, int steps = 2) {
  for (int s = 0; s < steps; ++s) peer.step();
  const auto path = QDir(dir).filePath(QString("%1-round-%2.safetensors").arg(name).arg(round)).toStdString();
  const auto written = peer.writeContribution(round, path);
  if (!written) qFatal("writeContribution: %s", written.error().c_str());
  const auto experts = peer.localExperts();
  return {PeerId(name.toStdString()), path, std::set<int>(experts.begin(), experts.end())};
}

// A peer that only announces: `bytes` of junk published as its contribution to each of `rounds`,
// claiming expert 0. Returns the content id (empty on failure).
inline ContentId announceJunk(node::MemorySwarm& swarm, const QString& path, int bytes, std::vector<qint64> rounds) {
  QFile junk(path);
  if (!junk.open(QIODevice::WriteOnly) || junk.write(QByteArray(bytes, 'j')) != bytes) return {};
  junk.close();
  const auto id = swarm.publish(path.toStdString());
  if (!id) return {};
  node::Announcement a;
  a.round = rounds.front();
  a.claims = {0};
  a.leaseUntil = rounds.front() + 3;  // lease_rounds (3): a longer lease counts for nothing
  for (auto r : rounds) a.contrib[r] = *id;
  return swarm.announce(a).ok() ? *id : ContentId();
}

}  // namespace es::test
