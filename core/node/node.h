// The node: one peer's SPES round state machine (ARCHITECTURE §4), on the engine thread.
//   join → discover for a moment → claim experts → train sync_every steps → publish the
//   contribution → gather the round's contributions of live peers until all arrived or the
//   adaptive deadline → validate + merge (trainer thread) → next round.
// Training never waits for the network: the trainer thread writes the contribution and goes on;
// the merge lands between two steps. Talks to the network only through `Swarm`.
#pragma once

#include "core/node/swarm.h"
#include "core/node/trainer_worker.h"
#include "core/store/ledger.h"
#include "core/train/run_manifest.h"

#include <QElapsedTimer>
#include <QObject>
#include <QThread>
#include <QTimer>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace es::node {

// The run's swarm policy as the node uses it. Its defaults are train::SwarmPolicy's (the run
// manifest's, the one place they are stated); the engine fills it from the parsed manifest.
struct RoundPolicy {
  int syncEvery = train::SwarmPolicy{}.syncEvery;
  int expertsPerPeer = train::SwarmPolicy{}.expertsPerPeer;
  int leaseRounds = train::SwarmPolicy{}.leaseRounds;
  double deadlineFactor = train::SwarmPolicy{}.deadlineFactor;  // × the median of recent gather times
  double deadlineMinSeconds = train::SwarmPolicy{}.deadlineMinSeconds;
  double deadlineMaxSeconds = train::SwarmPolicy{}.deadlineMaxSeconds;
  int joinWindowMs = 3000;       // listen for peers before claiming (not in the manifest)
  int snapshotEvery = train::SwarmPolicy{}.snapshotEvery;  // rounds between merged-state snapshots
};

struct NodeConfig {
  std::string runName;
  SpesPeerConfig peer;           // localExperts are chosen by the node
  RoundPolicy policy;
  int nExperts = 8;
  qint64 maxRounds = 0;          // 0 = run until stopped
  int maxExperts = 0;            // pre-flight memory budget (0 = no limit); see expertBudget()
  QString contribDir;            // our contributions
  QString fetchDir;              // others' contributions
  QString snapshotDir;           // our snapshots
};

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

class Node : public QObject {
  Q_OBJECT

 public:
  // `ledger` may be null (no history kept); otherwise every round, contribution, verdict, ban and
  // step metric goes there, a round only after its state files are durable.
  Node(Swarm& swarm, NodeConfig config, std::shared_ptr<const std::vector<std::uint16_t>> train,
       std::shared_ptr<const std::vector<std::uint16_t>> val, store::Ledger* ledger = nullptr, QObject* parent = nullptr);
  ~Node() override;

  void start();
  void stop();  // finish the step, announce leaving, then finished()
  Status exportModel(const QString& path);  // the last merged state
  const std::vector<int>& claims() const { return claims_; }
  // Fraction of the wall time since the first step that the trainer spent inside steps (the
  // rest: writing contributions, merging, waiting for a late round).
  double trainerBusyFraction() const;
  double meanRoundSeconds() const;
  qint64 roundsClosed() const { return roundsClosed_; }

  // Donor controls (node_view.cpp). A paused peer keeps its session (it still seeds and gossips);
  // its trainer waits between two steps. Pausing "after the round" lets this round's
  // contribution go out first, so the swarm does not wait for it.
  void setPaused(bool paused);
  void finishRoundThenPause();
  bool paused() const { return paused_; }
  // The swarm around us for views: peers (ourselves first), transfers, traffic.
  SwarmView view() const;

 Q_SIGNALS:
  void message(const QString& line);        // human-readable log
  void roundClosed(const es::node::RoundSummary& summary);
  void stepped(const es::node::StepReport& report);
  void failed(const QString& error);
  void pausedChanged(bool paused);
  void finished();

 private:
  void decideClaims();
  void startTrainer();
  void onReady(qint64 mergedRound, qint64 step, bool resumed, const QString& baseFingerprint);
  void onRoundTrained(const RoundTrained& trained);
  void onMerged(const RoundMerged& merged);
  void gather();
  void dropSuperseded(const std::string& sender, const std::string& currentContentId);
  void closeRound(bool deadline);
  void announce();
  std::vector<int> plannedClaims(qint64 nextRound) const;
  int capped(int count) const;  // at most config_.maxExperts
  void tryResync();
  bool fetchesProgressing();  // for the deadline: some awaited contribution got bytes since the last look
  std::optional<std::pair<qint64, std::string>> convergeOnLowestId();
  void onSnapshotAdopted(qint64 round, const QString& fingerprint, const QString& error);
  void checkAgreement();    // node_resync.cpp: is the state we merged the swarm's?
  struct StateGroup {
    std::string fingerprint;
    std::set<std::string> members;
    std::size_t ours = 0;  // peers in our own group, us included
  };
  std::optional<StateGroup> swarmStateOf(qint64 round, const std::string& ownFingerprint) const;
  void publishSnapshot(qint64 round, const QString& path);
  void noteFingerprint(qint64 round, const std::string& fingerprint);
  std::vector<SwarmPeer> livePeers(qint64 round) const;

  void recordRound(const RoundSummary& summary, qint64 step);
  void onPersisted(qint64 round, const QString& error);

  Swarm& swarm_;
  NodeConfig config_;
  store::Ledger* ledger_ = nullptr;
  StepReport lastStep_;
  QElapsedTimer sinceFirstStep_;
  double firstStepSeconds_ = 0, stepSeconds_ = 0;
  qint64 roundsClosed_ = 0;
  std::vector<double> allRoundSeconds_;
  std::map<qint64, std::pair<RoundSummary, qint64>> unrecorded_;  // merged, state not yet durable
  std::map<std::string, std::string> contentOf_;  // sender → content id, for the round being merged
  std::shared_ptr<const std::vector<std::uint16_t>> train_, val_;
  QThread trainerThread_;
  TrainerWorker* worker_ = nullptr;
  std::vector<int> claims_;
  std::vector<int> nextClaims_;  // sent to the trainer with the merge, adopted when it lands
  qint64 round_ = 0;  // the round being trained
  std::map<qint64, std::string> contrib_;    // our published contributions (round → id)
  std::map<qint64, std::set<std::string>> fetched_;  // others' contributions we fetched (round → ids)
  std::map<qint64, std::string> snapshots_;  // our published snapshots (round → id)
  std::map<qint64, std::string> fingerprints_;  // the states we merged (round → fingerprint), last two
  std::set<std::string> majority_;           // out of step: the peers whose state we take (empty: any two)
  std::string majorityState_;                // and the fingerprint of that state
  qint64 majoritySince_ = 0;                 // of that round (their snapshots of it or later will do)
  qint64 snapshotOffered_ = -1;              // the round we wrote an extra snapshot for (others disagree)
  qint64 mergedRound_ = 0;
  bool resyncWanted_ = false;                // newcomer, or out of step with the majority
  bool majorityElsewhere_ = false;           // out of step, and ≥ 2 others share one base: wait for their snapshot
  bool waitingForMajority_ = false;          // said so once
  std::string pendingSnapshot_;              // content id being fetched for a resync
  QElapsedTimer sinceRoundClosed_;
  std::vector<double> roundSeconds_;
  double lastLoss_ = 0, lastTokensPerSecond_ = 0;
  qint64 steps_ = 0;
  std::set<std::string> banned_;
  std::map<std::string, int> fetchRetries_;  // content id → failed fetches restarted

  // The round being gathered.
  struct Gather {
    qint64 round = 0;
    RoundTrained own;
    // content id → sender and the claims its record showed beside that contribution (a sender may
    // change claims right after; validation uses what held for this round)
    std::map<std::string, std::pair<std::string, std::set<int>>> fetching;
    std::map<std::string, IncomingContribution> arrived;         // sender → contribution
    std::set<std::string> expected;                              // peer ids
    std::map<std::string, std::int64_t> doneAtLastCheck;         // content id → bytes, at the deadline's last look
    QElapsedTimer clock;
    bool closing = false;
    bool deadlineHit = false;
    double gatherSecondsHint = 0;
  };
  std::optional<Gather> gather_;
  QTimer deadline_, joinWindow_;
  bool stopping_ = false;
  bool paused_ = false;          // as the trainer last reported (or as asked before it exists)
  bool pauseAfterRound_ = false;
};

}  // namespace es::node

