// The node: one peer's SPES round state machine, on the engine thread (docs/ARCHITECTURE.md,
// "One round, traced").
//   join → discover for a moment → claim experts → train sync_every steps → publish the
//   contribution → gather the round's contributions of live peers until all arrived or the
//   adaptive deadline → validate + merge (trainer thread) → next round.
// Training never waits for the network: the trainer thread writes the contribution and goes on;
// the merge lands between two steps. Talks to the network only through `Swarm`.
#pragma once

#include "core/node/agreement.h"
#include "core/node/node_clocks.h"
#include "core/node/node_config.h"
#include "core/node/node_log.h"
#include "core/node/own_record.h"
#include "core/node/peer_book.h"
#include "core/node/round_gather.h"
#include "core/node/round_recorder.h"
#include "core/node/run_folder.h"
#include "core/node/sharded_close.h"
#include "core/node/swarm.h"
#include "core/node/trainer_worker.h"
#include "core/store/ledger.h"

#include <QElapsedTimer>
#include <QObject>
#include <QThread>
#include <QTimer>
#include <QVariantMap>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace es::node {

// Pre-flight check: how many experts fit in `availableBytes`. Every peer holds the whole model
// four times (weights, merged base, contribution snapshot, the background writer's copy) plus
// gradients and two AdamW moments of the shared tensors; each claimed expert adds its gradient and
// two moments (all layers). At least 1 (a peer that cannot hold one expert cannot help anyway:
// the caller refuses to start then), at most nExperts.
struct ExpertBudget {
  int experts = 0;
  std::int64_t fixedBytes = 0, perExpertBytes = 0;
};
ExpertBudget expertBudget(std::int64_t totalParameters, std::int64_t expertParametersAllLayers, int nExperts,
                          std::int64_t availableBytes);

class Node : public QObject, private Agreement::Host {
  Q_OBJECT

 public:
  static constexpr int kGpuReadingMs = 1000;  // NVML readings attached to step reports, at most this often

  // `ledger` may be null (no history kept); otherwise every round, contribution, verdict, ban and
  // step metric goes there, a round only after its state files are durable.
  Node(Swarm& swarm, NodeConfig config, std::shared_ptr<const std::vector<std::uint16_t>> train,
       std::shared_ptr<const std::vector<std::uint16_t>> val, store::Ledger* ledger = nullptr,
       QObject* parent = nullptr);
  ~Node() override;

  void start();
  void stop();                              // finish the step, announce leaving, then finished()
  Status exportModel(const QString& path);  // the last merged state
  const std::vector<int>& claims() const { return own_.claims; }
  // Fraction of the wall time since the first step that the trainer spent inside steps (the
  // rest: writing contributions, merging, waiting for a late round).
  double trainerBusyFraction() const { return trainerSteps_.busyFraction(); }
  double meanRoundSeconds() const { return roundTimes_.mean(); }
  qint64 roundsClosed() const { return roundTimes_.mergedCount(); }

  // Donor controls (node_view.cpp). A paused peer keeps its session (it still seeds and gossips);
  // its trainer waits between two steps. Pausing "after the round" lets this round's
  // contribution go out first, so the swarm does not wait for it.
  void setPaused(bool paused);
  void finishRoundThenPause();
  // Training batches from now on come from `tokens` (a prepared run's peer moved on to other
  // shards); the trainer thread swaps them between two steps.
  void setTrainTokens(std::shared_ptr<const std::vector<std::uint16_t>> tokens);
  bool paused() const { return paused_; }
  // The swarm around us for views: peers (ourselves first), transfers, traffic.
  SwarmView view() const;

 Q_SIGNALS:
  void message(const QString& line);  // human-readable log
  // Every decision the node makes, as a kind and typed fields (the headless client's `--events`;
  // tests assert on these, never on a line's wording). Peers are full ids; rounds are numbers.
  //   claims {experts, change, round (a change: the round it applies from)} · ban {peer, reason}
  //   deadline {round, seconds, arrived, expected} · cutOff {round, heard, others}
  //   swarmSet {round, peers, contributions} (closed on the set a majority merged)
  //   silentFreshKeys {round, keys} (closed: only fresh keys' silent transfers were missing)
  //   freshKeysPastDeadline {round, keys, roundSeconds, holdSeconds} (closed: only fresh keys were
  //     missing, past their deadline; the round's age since its start, and their hold from it)
  //   noShow {peer, rounds} · stale {peer, rounds} · waitedForAgain {peer, round} (back in step)
  //   fetchFailed {content, reason, refused} · quota {round, usedBytes, quotaBytes, wantedBytes}
  //   outOfStep {by: "records" (round, members, ours, state) | "bases" (round, stale, contributions)}
  //   repair {round, contributions, fetching} · repaired {round, contributions, fingerprint}
  //   repairAbandoned {round, reason} · resync {round, announcers} (a snapshot fetch starts)
  //   waitingForMajority {} · keepingReference {} · resyncGivenUp {round, reason: deadline | unserved}
  //   snapshot {round, training} (one adopted) · snapshotUnreadable {error} · snapshotRefused {error}
  //   contributionDropped {round} (hashed across a change of state) · resumed {round, step, note}
  void noted(const QString& kind, const QVariantMap& fields);
  void roundClosed(const es::node::RoundSummary& summary);
  // The round closed last, merged again with the majority's set (agreement_repair.cpp): the state it ended in.
  void roundRepaired(const es::node::RoundSummary& summary);
  void stepped(const es::node::StepReport& report);
  void failed(const QString& error);
  void pausedChanged(bool paused);
  void finished();

 private:
  // node_trainer.cpp: the trainer thread and what it reports.
  void startTrainer();
  void onStepped(StepReport report);
  void onReady(qint64 mergedRound, qint64 step, bool resumed, const QString& baseFingerprint,
               const QString& resumeNote);
  void onRoundTrained(const RoundTrained& trained);
  // node_publish.cpp: our contribution and snapshots, hashed off this thread (Swarm::publish).
  void announce();
  void publishContribution(const RoundTrained& trained);
  void onContributionPublished(const RoundTrained& trained, std::uint64_t epoch, Expected<ContentId> content);
  void startGathering(const RoundTrained& trained, const ContentId& own);
  void publishSnapshot(qint64 round, const QString& path);
  void onSnapshotPublished(qint64 round, const QString& path, Expected<ContentId> content);
  // node_claims.cpp: which experts we train.
  void decideClaims();
  std::vector<int> plannedClaims(qint64 nextRound) const;
  int capped(int count) const;  // at most config_.maxExperts
  // node_gather.cpp: one pass over the records for the round we gather, and the swarm's events.
  void gather();
  void passAfter(qint64 ms);
  void closeWithoutFreshKeys(const std::set<PeerId>& onAnotherBase);
  void noteAnnounced(const SwarmPeer& peer, const ContentId& content);
  bool builtOnAnotherState(const SwarmPeer& sender) const;  // its record's base is not ours
  bool announcesOurOwn(const PeerId& sender, const ContentId& content);
  void onContributionFetched(const ContentId& content, const std::string& path);
  void onFetchFailed(const ContentId& content, const std::string& reason, bool refused);
  void refuse(const ContentId& content, const std::string& reason);
  void liftInStepExclusions();
  void onDeadline();
  // `withoutFreshKeys`: fresh keys' contributions were not waited for (closeWithoutFreshKeys); such
  // a round, like one closed by the deadline, does not feed the next deadline.
  void closeRound(bool deadline, const std::set<ContentId>* only = nullptr, bool withoutFreshKeys = false);
  void countNoShows();
  // node_merged.cpp: a round's merge landed.
  void onMerged(const RoundMerged& merged);
  void reportExpertCuts(qint64 round, const MergeResult& result);
  void reportUncredited(qint64 round, const MergeResult& result);
  void reportTopology(qint64 round, const sync::RoundTopology* next);
  RoundSummary summarize(const RoundMerged& merged) const;
  UnrecordedRound captureForLedger(const RoundSummary& summary, qint64 step) const;
  void noteMergedSet(const MergeResult& result);
  void resyncIfOutOfStep(const MergeResult& result);
  void countStale(const MergeResult& result);
  void retireOldContent(qint64 mergedRound);
  void advanceRound(const RoundSummary& summary);
  // node_agreement.cpp: what the agreement asks of us (Agreement::Host), and its answers.
  bool trainerRunning() const override { return worker_ != nullptr; }
  bool mergeQueued() const override { return gather_ && gather_->closing(); }
  void holdGatheredRound() override;
  void resumeHeldRound() override;
  void writeSnapshotNow() override;
  void adoptSnapshot(const std::string& path, std::int64_t round, const ContentId& snapshot) override;
  int stepsTheSwarmTrained(std::int64_t round, const ContentId& snapshot) const;
  void remerge(std::int64_t round, const std::vector<IncomingContribution>& set,
               const std::string& fingerprint) override;
  void tookSnapshot(std::int64_t round, const std::string& fingerprint) override;
  FetchLimits contributionSizes(const PeerId& sender, const std::set<int>& claims, std::int64_t round,
                                const std::string& baseHash) const override;
  FetchLimits snapshotSizes(std::int64_t round) const override;
  std::int64_t bytesComing() const override { return gather_ ? gather_->bytesComing() : 0; }
  void ban(const PeerId& peer, const std::string& reason) override;
  void banSender(const PeerId& sender, const std::string& reason);
  void onRemerged(qint64 round, const QString& fingerprint, const QString& sharedFingerprint, int accepted,
                  const QString& error);
  void forgetContributionsAfter(qint64 round);  // built on a state we left
  // node_sharded.cpp: a sharded round from its close to its merge (issue 38).
  std::vector<std::string> shardsWeReduce(const sync::RoundTopology& topology) const;
  FetchLimits shardedContributionSizes(const RoundTrained& trained, const PeerId& sender, const std::set<int>& claims,
                                       const std::vector<std::string>& extra = {}) const;
  QString ownOutputDir(qint64 round) const;
  void closeSharded(const std::vector<IncomingContribution>& list);
  void reduceOn(const std::vector<std::string>& shards, const QString& dir);
  void onShardsReduced(qint64 round, const std::vector<ReducedShard>& reduced, const QString& error);
  void onOutputsPublished(qint64 round, Expected<PublishedOutputs> published);
  void passOutputs();
  void onOutputDeadline();
  std::vector<std::string> replaceAbsentReducers(ShardedClose& close, const std::vector<IncomingContribution>& list);
  void takeOverShards(const std::vector<std::string>& shards);
  void recomputeShards(const std::vector<std::string>& shards);
  void fetchShardsAgain(const std::vector<std::string>& shards);  // then reduced (taken over or recomputed)
  bool refetchInput(const ShardedSenderFiles& sender);
  void refetchedAll();
  void giveUpRecomputing(const QString& why);
  void applySharded();
  void onShardsRefused(qint64 round, const QString& error);
  void onShardsNameRefused(qint64 round, const ShardRefusals& refusals);
  std::vector<std::string> drawAuditShards(const RoundTrained& trained);
  void verifyOwn(const std::vector<std::string>& shards);
  void banLiars();
  bool refusedHere(const PeerId& sender) const { return sharded_ && sharded_->refusedHere.count(sender); }
  bool shardedFetched(const ContentId& content, const std::string& path);
  bool shardedFetchFailed(const ContentId& content, const std::string& reason, bool refused);
  void finishSharded();
  // The run id written into contributions and snapshots (the trainer's; the swarm's if unset).
  std::string runIdForFiles() const { return config_.peer.runId.empty() ? swarm_.runId() : config_.peer.runId; }

  Swarm& swarm_;
  const NodeConfig config_;
  store::Ledger* ledger_ = nullptr;
  const NodeLog log_;  // → message, noted
  OwnRecord own_;      // what our record says
  PeerBook peers_;
  RunFolder folder_;
  RoundRecorder recorder_;
  Agreement agreement_;
  std::optional<RoundGather> gather_;                        // the round being gathered
  std::optional<ShardedClose> sharded_;                      // gather_'s round, sharded, once closed (node_sharded.cpp)
  std::map<qint64, std::vector<ContentId>> ownOutputs_;      // what we published as a reducer, per round
  std::map<qint64, std::vector<ContentId>> fetchedOutputs_;  // the others' indexes and outputs we fetched
  std::map<qint64, std::vector<std::string>> audits_;        // a sharded round's shards we audit (drawn at its start)
  std::optional<bool> reportedSharded_;                      // the topology last told (reportTopology)
  std::shared_ptr<const std::vector<std::uint16_t>> train_, val_;
  QThread trainerThread_;
  TrainerWorker* worker_ = nullptr;
  std::vector<int> nextClaims_;       // sent to the trainer with the merge, adopted when it lands
  std::optional<RoundTrained> held_;  // our round, trained on the state we are leaving
  // The trainer's state was replaced (a snapshot adopted, a round repaired) this many times: a
  // contribution hashed across a change is built on a state we left (onContributionPublished).
  std::uint64_t baseEpoch_ = 0;
  std::optional<RoundSummary> lastSummary_;  // of the round closed last (a repair reports it again)
  TrainerSteps trainerSteps_;
  RoundTimes roundTimes_;
  SwarmPace pace_;
  int snapshotSkip_ = 0;  // steps of the round after the snapshot being adopted that we skip
  QTimer deadline_, joinWindow_;
  QTimer outputDeadline_;  // a sharded round's reducers given up on (node_sharded.cpp)
  // A gather pass when a silent fetch frees its slot (RoundGather::msUntilASlotFrees).
  QTimer pass_;
  bool stopping_ = false;
  bool paused_ = false;  // as the trainer last reported (or as asked before it exists)
  bool pauseAfterRound_ = false;
};

}  // namespace es::node
