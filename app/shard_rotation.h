// A peer that holds some shards of a prepared run moves on through them (issue 40): at every step
// it computes its epoch (train::epochAtTokens: one pass over its window of shards, counted by the
// run's global step; after the first move at most one window further per move, so no window is
// skipped), and when the epoch changes it fetches the new window's shards on the run
// torrent, reads them on a thread of their own (a window is up to the disk budget: hundreds of MB
// would hold the engine thread, and with it the alert pump and the round), hands their tokens to
// the trainer once read (Node::setTrainTokens: training never waits for the transfer or the
// read), and deletes the shards it no longer holds. Every move is noted
// ("shards": epoch, held, fetched, dropped) with what is on disk at that moment.
#pragma once

#include "core/node/node.h"
#include "core/train/corpus_prep.h"
#include "p2p/swarm_session.h"

#include <QObject>
#include <QTimer>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace es::app {

struct ShardRotationSetup {
  QString folder;  // the run folder (the run torrent's files are below it)
  std::string peerId, runId;
  std::vector<std::int64_t> shardTokens;  // the run's shards, from run.json
  std::int64_t budgetBytes = 0;
  std::int64_t tokensPerStep = 0;  // batch_size × seq_len
  int vocabSize = 0;
};

class ShardRotation : public QObject {
  Q_OBJECT

 public:
  // `held`: the shards on disk now (what the trainer was given at start).
  ShardRotation(ShardRotationSetup setup, std::vector<int> held, p2p::SwarmSession& session, node::Node& node);

  void onStep(std::int64_t step);

 Q_SIGNALS:
  void noted(const QString& kind, const QVariantMap& fields);
  void message(const QString& line);

 private:
  void checkFetched();
  // The window's tokens are read (or could not be): on the engine thread again.
  void onShardsRead(const Expected<train::TokenBuffer>& tokens);
  std::set<std::string> filesOf(const std::vector<int>& shards, bool withSmallFiles) const;

  ShardRotationSetup s_;
  p2p::SwarmSession& session_;
  node::Node& node_;
  std::vector<int> held_, target_;
  std::int64_t epoch_ = -1, targetEpoch_ = -1;
  // The step's tokens at which the epoch we last looked at ends: below it onStep has nothing to do
  // (it walked every epoch and hashed every shard at each step).
  std::int64_t nextLookTokens_ = 0;
  QTimer poll_;
  bool reading_ = false;  // the new window's shards are being read
};

}  // namespace es::app
