// The trainer thread (docs/ARCHITECTURE.md, "Threads"): owns the SpesPeer and with it every Torch
// object. It trains continuously, one step per event-loop turn, so commands (merge, stop) queued
// by the node run between steps. At each round boundary it writes the contribution and goes on
// training; it waits only when it reaches the *next* boundary before the previous round was merged.
#pragma once

#include "core/node/node_metatypes.h"
#include "core/spes/spes_peer.h"

#include <QObject>
#include <QString>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace es::node {

struct RoundTrained {
  qint64 round = 0;
  ContributionWritten contribution;
  double meanLoss = 0;
  double tokensPerSecond = 0;
  double seconds = 0;  // time spent in this round's steps
  // Issue 38: set when the round is sharded (the contribution is a folder of shard files): the
  // plan and reducer orders it was written for, which the node fetches and reduces by.
  std::shared_ptr<const sync::RoundTopology> topology;
};

struct RoundMerged {
  MergeResult result;
  qint64 step = 0;
  QString snapshotPath;  // set on rounds that write a snapshot
  // Issue 38: how the next round is reduced (SpesPeer::nextTopology), once sharded rounds are
  // allowed (allowShardedRounds); null before.
  std::shared_ptr<const sync::RoundTopology> nextTopology;
};

class TrainerWorker : public QObject {
  Q_OBJECT

 public:
  TrainerWorker(SpesPeerConfig config, std::shared_ptr<const std::vector<std::uint16_t>> train,
                std::shared_ptr<const std::vector<std::uint16_t>> val, QString contribDir, QString snapshotDir,
                int snapshotEvery);
  ~TrainerWorker() override;

  // Invoke on the worker's thread (QMetaObject::invokeMethod).
  void start();
  // Merges `round`, then trains `claims` from the next step on (before the next contribution).
  void merge(qint64 round, const std::vector<IncomingContribution>& contributions, const std::vector<int>& claims);
  void stop();
  // Pausing takes effect between two steps; a pause "after the round" once this round's
  // contribution is written (a merge still lands while paused).
  void setPaused(bool paused);
  void pauseAfterRound();
  // Drops the round in progress and continues from a snapshot (newcomer, or out of step).
  void adoptSnapshot(const QString& path, qint64 expectedRound, int skipSteps);  // SpesPeer::adoptSnapshot
  // Merges `round` again with the set the majority merged (SpesPeer::remerge; the node's repair of
  // a split): `remerged` says how it went; a contribution written since goes out again, on the
  // new state, as `roundTrained`.
  void remerge(qint64 round, const std::vector<IncomingContribution>& contributions, const QString& fingerprint);
  // A snapshot of the newest merged state, now (peers that merged another state need it).
  void writeSnapshotNow();
  void setTrainTokens(std::shared_ptr<const std::vector<std::uint16_t>> tokens);  // SpesPeer::setTrainTokens
  // Issue 38, a sharded round on this thread (the node does not run one yet; tst_trainer_sharded
  // drives these as it will). allowShardedRounds: from the next merge on, each merge derives the
  // next round's topology (RoundMerged::nextTopology), and a round it says is sharded is written
  // as a folder of shard files (SpesPeer::writeShardedContribution) — the node must fetch and
  // reduce such rounds, so only a node that can turns it on. reduceShards: this peer's `shards`
  // of the round into `outputDir` (`shardsReduced`); applyShards: the round's new state from one
  // merged file per shard, taken as merge() takes its result (`merged`).
  void allowShardedRounds(bool allowed);
  void reduceShards(qint64 round, const ShardedRoundSpec& spec, const std::vector<std::string>& shards,
                    const QString& outputDir);
  void applyShards(qint64 round, const ShardedRoundSpec& spec, const std::vector<std::string>& mergedPaths,
                   const std::vector<int>& claims);
  Status exportTo(const QString& path);  // the merged model (safetensors) + <path>.config.json

 Q_SIGNALS:
  void ready(qint64 mergedRound, qint64 step, bool resumed, const QString& baseFingerprint, const QString& resumeNote);
  void failed(const QString& message);
  void stepped(const es::node::StepReport& report);
  void roundTrained(const es::node::RoundTrained& round);
  void merged(const es::node::RoundMerged& merged);
  void stopped();
  // `contentAtFault`: the error is in the snapshot's bytes (its announcers lied), not that this
  // disk could not give them back (a file removed under the fetch).
  void snapshotAdopted(qint64 round, const QString& fingerprint, const QString& error, bool contentAtFault);
  // `sharedFingerprint` and `accepted` as in MergeResult; error: nothing changed.
  void remerged(qint64 round, const QString& fingerprint, const QString& sharedFingerprint, int accepted,
                const QString& error);
  void snapshotWritten(qint64 round, const QString& path);
  // reduceShards' result: the merged files (empty and `error` set when it failed: nothing changed).
  void shardsReduced(qint64 round, const std::vector<es::node::ReducedShard>& reduced, const QString& error);
  // applyShards refused the files (one moves a weight past the ceiling, one is unreadable):
  // nothing changed, the round still awaits its merge.
  void shardsRefused(qint64 round, const QString& error);
  // applyShards found merged files that refuse senders: nothing changed, the round is reduced again
  // without them (shard_refusals.h's second pass).
  void shardsNameRefused(qint64 round, const es::node::ShardRefusals& refusals);
  void persisted(qint64 round, const QString& error);  // the state after `round` is durable
  void pausedChanged(bool paused);

 private:
  void tick();
  void writeContribution();
  // A merge's result taken (merge, applyShards): claims, snapshot, `merged`, training on.
  void finishMerge(qint64 round, MergeResult result, const std::vector<int>& claims);
  bool shardedRound(qint64 round) const;
  QString contributionPath(qint64 round) const;
  void reportPersisted();  // emits the writer's reports, in order, from this thread

  SpesPeerConfig config_;
  std::shared_ptr<const std::vector<std::uint16_t>> train_, val_;
  QString contribDir_, snapshotDir_;
  int snapshotEvery_ = 0;
  std::unique_ptr<SpesPeer> peer_;
  qint64 awaitingMerge_ = 0;  // round whose merge has not landed yet (0 = none)
  bool contributionDue_ = false;
  bool stopping_ = false;
  bool ticking_ = false;
  bool paused_ = false;
  bool pauseAfterRound_ = false;
  // The writer thread's reports (round, error), emitted here: after the round's `merged` (so the
  // node knows the round) and, at stop(), before it returns (so they precede `finished`).
  std::mutex persistMutex_;
  std::vector<std::pair<qint64, QString>> persistReports_;
  RoundTrained lastTrained_;  // the last contribution's report (remerge sends it again, rewritten)
  bool shardedRounds_ = false;
  void deriveTopology();
  std::shared_ptr<const sync::RoundTopology> nextTopology_;  // of round mergedRound() + 1
  double roundLoss_ = 0, roundSeconds_ = 0;
  qint64 roundTokens_ = 0, roundSteps_ = 0;
};

}  // namespace es::node

Q_DECLARE_METATYPE(es::node::RoundTrained)
Q_DECLARE_METATYPE(es::node::RoundMerged)
Q_DECLARE_METATYPE(std::vector<es::node::ReducedShard>)
Q_DECLARE_METATYPE(es::node::ShardRefusals)
