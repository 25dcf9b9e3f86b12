// The node: one peer's SPES round state machine, on the engine thread (docs/ARCHITECTURE.md,
// "One round, traced").
//   join → discover for a moment → claim experts → train sync_every steps → publish the
//   contribution → gather the round's contributions of live peers until all arrived or the
//   adaptive deadline → validate + merge (trainer thread) → next round.
// Training never waits for the network: the trainer thread writes the contribution and goes on;
// the merge lands between two steps. Talks to the network only through `Swarm`.
#pragma once

#include "core/node/rules/bans.h"
#include "core/node/rules/peer_sightings.h"
#include "core/node/rules/round_claims.h"
#include "core/node/rules/standing.h"
#include "core/node/swarm.h"
#include "core/node/trainer_worker.h"
#include "core/store/ledger.h"
#include "core/train/run_manifest.h"

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

// The run's swarm policy as the node uses it. Its defaults are train::SwarmPolicy's (the run
// manifest's, the one place they are stated); the engine fills it from the parsed manifest.
struct RoundPolicy {
  int syncEvery = train::SwarmPolicy{}.syncEvery;
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

// Fetches of others' contributions in flight at once; the rest wait in the node for a slot.
constexpr int kMaxConcurrentFetches = 8;
// A peer whose announced contribution never began to arrive (not one byte by round close) this many
// rounds in a row is not waited for (nor counted as an owner) until one arrives again (issue 15, item 3).
constexpr int kNoShowRounds = 2;
constexpr int kStaleRounds = 2;  // contributions on another base in a row, while we hold the majority's state
// A no-show or stale peer whose record shows it merged our state is waited for again (countNoShows),
// at most once in this many rounds: a liar copying our fingerprint is waited for in ≤ 2 rounds of 4.
constexpr int kNoShowLiftRounds = 4;

// A step's GPU reading as the ledger keeps it (memory in MiB).
std::optional<store::GpuMetric> gpuMetricOf(const std::optional<GpuReading>& reading);

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
  void message(const QString& line);  // human-readable log
  // The facts behind some of those lines, as fields (the headless client's `--events`): "claims"
  // {experts, change, round (the round a change applies from)}, "ban" {peer, reason}, "deadline" {round, seconds,
  // arrived, expected}, "resync" {round, announcers} (a snapshot fetch starts), "snapshot" {round, training} (one
  // adopted), "resumed" {round, step, note (only when a saved round was passed over: why)}.
  void noted(const QString& kind, const QVariantMap& fields);
  void roundClosed(const es::node::RoundSummary& summary);
  // The round closed last, merged again with the majority's set (node_repair.cpp): the state it ended in.
  void roundRepaired(const es::node::RoundSummary& summary);
  void stepped(const es::node::StepReport& report);
  void failed(const QString& error);
  void pausedChanged(bool paused);
  void finished();

 private:
  void decideClaims();
  void startTrainer();
  void onStepped(StepReport report);
  void onReady(qint64 mergedRound, qint64 step, bool resumed, const QString& baseFingerprint,
               const QString& resumeNote);
  void onRoundTrained(const RoundTrained& trained);
  // node_publish.cpp: our contribution and snapshots, hashed off this thread (Swarm::publish).
  void publishContribution(const RoundTrained& trained);
  void onContributionPublished(const RoundTrained& trained, std::uint64_t epoch, Expected<ContentId> content);
  void startGathering(const RoundTrained& trained, const ContentId& own);
  void onSnapshotPublished(qint64 round, Expected<ContentId> content);
  void onMerged(const RoundMerged& merged);
  void gather();
  // node_fetch.cpp: what a fetch may bring, the disk quota, refusals, cleaning the run folder.
  void noteAnnounced(const SwarmPeer& peer, const ContentId& content);  // node_gather.cpp
  bool startFetch(const ContentId& content, qint64 round);
  // `baseHash`: the base the contribution names (default: our own contribution's of the round gathered).
  FetchLimits contributionLimits(const PeerId& sender, const std::set<int>& claims, qint64 round,
                                 const std::string& baseHash = {}) const;
  FetchLimits snapshotLimits(qint64 round) const;
  bool startSnapshotFetch(qint64 round, const ContentId& content);
  int fetchesInFlight() const;
  // The run id written into contributions and snapshots (the trainer's; the swarm's if unset).
  std::string runIdForFiles() const { return config_.peer.runId.empty() ? swarm_.runId() : config_.peer.runId; }
  bool quotaAllows(std::int64_t bytes, const QString& what);
  std::int64_t runFolderBytes() const;
  void onFetchFailed(const ContentId& content, const std::string& reason, bool refused);
  void refuse(const ContentId& content, const std::string& reason);
  void banSender(const PeerId& sender, const std::string& reason);
  bool announcesOurOwn(const PeerId& sender, const ContentId& content);
  void retireUnarrived();
  void cleanRunFolder(bool atStart);
  void dropSuperseded(const PeerId& sender, const ContentId& current);
  // `only`: merge just the contributions with these content ids (closeOnSwarmSet).
  void closeRound(bool deadline, const std::set<ContentId>* only = nullptr);
  void announce();
  std::vector<int> plannedClaims(qint64 nextRound) const;
  int capped(int count) const;  // at most config_.maxExperts
  void tryResync();
  // node_gather.cpp: gathering the round's contributions.
  // For the deadline: some awaited contribution got bytes since the last look, at a rate that
  // brings the rest before deadline.max_seconds.
  bool fetchesProgressing();
  // At the deadline: true when we heard from fewer than half of the other expected peers (≥ 2)
  // since our last merge — cut off from the swarm, where merging alone only makes an odd state.
  bool cutOff();
  void noteHeard();                         // peersChanged: who announced something new
  std::map<PeerId, std::int64_t> lastSeq_;  // peer → the seq of its record we saw last
  std::set<PeerId> heardThisRound_;         // records that changed since our last merge
  void onContributionFetched(const ContentId& content, const std::string& path);
  void countNoShows();          // at round close: senders whose announced contribution sent no byte
  void liftInStepExclusions();  // countNoShows: excluded peers in step with us again are waited for again
  FetchLimits limitsFor(const ContentId& content, qint64 round) const;  // every announcer's sizes
  std::optional<std::pair<qint64, ContentId>> convergeOnLowestId();
  std::optional<std::pair<std::pair<qint64, ContentId>, int>> bestAnnouncedSnapshot() const;
  bool hasAnnouncers() const;
  qint64 newestAdoptableRound() const;  // node_resync.cpp
  void onSnapshotAdopted(qint64 round, const QString& fingerprint, const QString& error, bool contentAtFault);
  void fetchSnapshotAgain(const QString& why);  // at most twice per snapshot, then the next candidate
  void checkAgreement();                        // node_resync.cpp: is the state we merged the swarm's?
  void watchResync();  // node_resync.cpp: arm the watchdog that keeps a resync from waiting forever
  void onResyncWatchdog();
  void dropPendingSnapshot(const QString& why, bool never);
  void giveUpResync();
  void endResync();
  struct StateGroup {
    std::string fingerprint;
    std::set<PeerId> members;
    std::size_t ours = 0;  // peers in our own group, us included
  };
  std::optional<StateGroup> swarmStateOf(qint64 round, const std::string& ownFingerprint) const;
  // node_swarm_set.cpp: the round we gather closed on the set a decided majority merged it with.
  std::optional<StateGroup> mergedByMajority(qint64 round) const;
  bool closeOnSwarmSet();
  // node_repair.cpp: a split repaired by merging the majority's set again (merged_set.h).
  struct ClosedRound {
    qint64 round = 0;
    std::map<std::pair<PeerId, ContentId>, std::set<int>> fetching;  // as Gather's, ours included
    std::map<ContentId, std::string> fetchedPath;                    // content → file, ours included
    std::string ownBaseHash;                                         // the base the round's contributions were built on
  };
  struct Repair {
    qint64 round = 0;
    std::string fingerprint, digest;  // the majority's state and set
    std::vector<IncomingContribution> have;
    std::map<ContentId, std::vector<IncomingContribution>> missing;  // content → its senders (no path yet)
    bool merging = false;
    std::int64_t doneBytes = 0;  // the missing ones' bytes at the watchdog's last look
  };
  void keepClosedRound(const MergeResult& result);
  std::string majoritySetDigest(qint64 round, const std::set<PeerId>& members) const;
  std::map<std::pair<PeerId, ContentId>, std::set<int>> knownContributions(qint64 round) const;
  bool startRepair(qint64 round, const StateGroup& group);
  bool startRepairFetch(qint64 round, const ContentId& content, const std::vector<IncomingContribution>& senders);
  void onRepairFetched(const ContentId& content, const std::string& path);
  void runRepair();
  bool repairStalled();
  void abandonRepair(const QString& why);
  void onRemerged(qint64 round, const QString& fingerprint, const QString& sharedFingerprint, int accepted,
                  const QString& error);
  std::optional<ClosedRound> lastClosed_;
  std::optional<Repair> repair_;
  std::optional<RoundSummary> lastSummary_;         // of the round closed last (a repair reports it again)
  qint64 repairTried_ = 0;                          // a round is repaired at most once
  std::map<qint64, std::string> setDigests_;        // round → digest of the set we merged (our record's `sets`)
  std::map<qint64, store::RoundRow> repairedRows_;  // a repaired round's ledger row, once its state is durable
  void publishSnapshot(qint64 round, const QString& path);
  void noteFingerprint(qint64 round, const std::string& fingerprint);
  // Claims, a lease that holds at `round`, not banned, not silent (core/node/rules/peer_rules.h).
  // Without `withNoShows`, peers whose announced contributions did not arrive kNoShowRounds
  // rounds in a row, or were stale kStaleRounds rounds in a row while we held the majority's
  // state, are left out too (they are still fetched from, so they come back at once).
  std::vector<SwarmPeer> livePeers(qint64 round, bool withNoShows = false) const;
  bool builtOnAnotherState(const SwarmPeer& sender) const;  // node_gather.cpp: its record's base is not ours
  void forgetContributionsAfter(qint64 round);              // node_resync.cpp: built on a state we left
  bool staleOut(const PeerId& peer) const;  // stale kStaleRounds rounds in a row (or more), none merged since
  void loadBans();  // node_bans.cpp: the run's bans in force and the peers' standing, from the ledger
  void noteStanding(qint64 round, const MergeResult& result);  // node_bans.cpp: accepted contributions add weight
  const Standing& standingBefore(qint64 round) const;          // node_bans.cpp: the weights of a vote on `round`
  void ban(const PeerId& peer, const std::string& reason);
  bool isBanned(const PeerId& peer) const;  // and the ban has not expired

  // onMerged's steps (node.cpp).
  RoundSummary summarize(const RoundMerged& merged) const;
  void resyncIfOutOfStep(const MergeResult& result);
  void countStale(const MergeResult& result);  // node_gather.cpp: after resyncIfOutOfStep
  void retireOldContent(qint64 mergedRound);
  void advanceRound(const RoundSummary& summary);
  // What the ledger records of a merged round, captured at merge time (node_record.cpp).
  struct UnrecordedRound {
    RoundSummary summary;
    qint64 step = 0;
    std::map<PeerId, ContentId> contentOf;        // sender → its contribution
    std::map<PeerId, std::vector<int>> claimsOf;  // sender → its claims in that round
    double loss = 0, lr = 0;                      // the last step's, at the merge
    std::optional<GpuReading> gpu;                // the last step's reading, if it had one
  };
  UnrecordedRound captureForLedger(const RoundSummary& summary, qint64 step) const;
  void recordRound(const UnrecordedRound& round);
  void onPersisted(qint64 round, const QString& error);

  Swarm& swarm_;
  NodeConfig config_;
  store::Ledger* ledger_ = nullptr;
  StepReport lastStep_;
  QElapsedTimer sinceGpuReading_;
  QElapsedTimer sinceFirstStep_;
  double firstStepSeconds_ = 0, stepSeconds_ = 0;
  qint64 roundsClosed_ = 0;
  std::vector<double> allRoundSeconds_;
  std::map<qint64, UnrecordedRound> unrecorded_;  // merged, state not yet durable
  std::map<PeerId, ContentId> contentOf_;         // sender → its contribution, for the round being merged
  std::shared_ptr<const std::vector<std::uint16_t>> train_, val_;
  QThread trainerThread_;
  TrainerWorker* worker_ = nullptr;
  std::vector<int> claims_;
  std::vector<int> nextClaims_;                    // sent to the trainer with the merge, adopted when it lands
  qint64 round_ = 0;                               // the round being trained
  std::map<qint64, ContentId> contrib_;            // our published contributions (round → content)
  std::map<qint64, std::set<ContentId>> fetched_;  // others' contributions we fetched (round → contents)
  std::map<qint64, ContentId> snapshots_;          // our published snapshots (round → content)
  std::map<qint64, std::string> fingerprints_;     // the states we merged (round → fingerprint), last two
  std::set<PeerId> majority_;                      // out of step: the peers whose state we take (empty: any two)
  std::string majorityState_;                      // and the fingerprint of that state
  qint64 majoritySince_ = 0;                       // of that round (their snapshots of it or later will do)
  qint64 snapshotOffered_ = -1;                    // the round we wrote an extra snapshot for (others disagree)
  qint64 mergedRound_ = 0;
  bool resyncWanted_ = false;             // newcomer, or out of step with the majority
  bool majorityElsewhere_ = false;        // out of step, and ≥ 2 others share one base: wait for their snapshot
  bool waitingForMajority_ = false;       // said so once
  ContentId pendingSnapshot_;             // being fetched for a resync
  qint64 pendingSnapshotRound_ = 0;       // the round its announcers gave it
  std::int64_t pendingDoneBytes_ = 0;     // its bytes at the watchdog's last look
  std::set<ContentId> badSnapshots_;      // refused or failed: never fetched again
  std::set<ContentId> stalledSnapshots_;  // got no bytes for a watchdog period: others first
  QTimer resyncWatchdog_;
  QElapsedTimer outOfStepSince_;      // the resync in progress started (bounds the wait)
  qint64 gaveUpThrough_ = -1;         // splits up to this round no longer hold us (we waited)
  std::optional<RoundTrained> held_;  // our round, trained on the state we are leaving
  // The trainer's state was replaced (a snapshot adopted, a round repaired) this many times: a
  // contribution hashed across a change is built on a state we left (onContributionPublished).
  std::uint64_t baseEpoch_ = 0;
  QElapsedTimer sinceRoundClosed_;
  std::vector<double> roundSeconds_;
  double lastLoss_ = 0, lastTokensPerSecond_ = 0;
  qint64 steps_ = 0;
  Bans banned_;                            // peer id → when and why (expired ones are ignored: isBanned)
  Standing standing_;                      // peer id → rounds we merged its contribution: its vote's weight
  std::map<qint64, Standing> standingAt_;  // round → standing_ before we merged it (the last 3 rounds)
  PeerSightings sightings_;                // which peers the ledger has seen, and when (peersChanged)
  RoundClaims roundClaims_;                // each peer's claims per round, from its records (peersChanged)
  void noteRoundClaims();
  // Peer id → the round we first saw it claiming: the grace of the silent rule (peer_rules.h).
  // Filled as livePeers meets them, hence mutable. Peers may differ by a round on a newcomer's
  // grace (they met it at different times); they agree again once it publishes or stays silent.
  mutable std::map<PeerId, std::int64_t> claimingSince_;
  std::map<ContentId, int> fetchRetries_;  // content → failed fetches restarted
  std::map<PeerId, int> noShows_;          // sender → rounds in a row its announced contribution sent no byte
  std::map<PeerId, qint64> noShowLifted_;  // sender → the round we last waited for it again (in step)
  std::map<PeerId, int> staleStreak_;      // sender → rounds in a row its contribution was stale (we in step)
  std::set<ContentId> snapshotFetches_;    // snapshots fetched (retired at round close)
  qint64 quotaReportedRound_ = -1;         // the quota message is said once a round
  bool quotaReached_ = false;
  std::int64_t diskUsed_ = 0;  // the run folder at the last fetch decision

  // The round being gathered.
  struct Gather {
    qint64 round = 0;
    RoundTrained own;
    // (sender, content id) → the claims its record showed beside that contribution (a sender may
    // change claims right after; validation uses what held for this round). Keyed by both: a peer
    // that announces another's content id as its own does not take over that sender's slot — the
    // one transfer serves both, and validation (the file names its sender) rejects the impostor.
    std::map<std::pair<PeerId, ContentId>, std::set<int>> fetching;
    // Senders whose record of this round we never saw: their claims are a guess (the record's
    // newer ones), so a size that does not match them is no proof of a lie (no ban).
    std::set<PeerId> claimsGuessed;
    std::set<PeerId> givenUp;  // senders not waited for any more this round (their content was refused)
    std::map<PeerId, IncomingContribution> arrived;  // sender → contribution
    // Each merged sender's claims, taken as the round closes (closeRound): a contribution that
    // arrives during the merge joins `arrived` (a repair may use it) but not the ledger's rows.
    std::map<PeerId, std::set<int>> mergedClaims;
    std::map<ContentId, FetchLimits> transfers;    // content → the sizes its transfer was started with
    std::map<ContentId, std::string> fetchedPath;  // content → file, once fetched
    std::set<PeerId> expected;
    bool cutOffSaid = false;
    struct Progress {
      std::int64_t bytes = 0;  // at the deadline's last look (0 at the start)
      qint64 atMs = 0;         // the gather clock then
      qint64 startedMs = 0;    // when the transfer started
    };
    std::map<ContentId, Progress> progress;      // content → its transfer's progress
    std::map<ContentId, std::int64_t> inFlight;  // content → the most bytes it may bring
    QElapsedTimer clock;
    bool closing = false;
    bool deadlineHit = false;
    double gatherSecondsHint = 0;
    bool hasContent(const ContentId& content) const;  // some sender's entry names it
    std::set<PeerId> sendersOf(const ContentId& content) const;
  };
  std::optional<Gather> gather_;
  QTimer deadline_, joinWindow_;
  bool stopping_ = false;
  bool paused_ = false;  // as the trainer last reported (or as asked before it exists)
  bool pauseAfterRound_ = false;
};

}  // namespace es::node
