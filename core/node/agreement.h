// Agreement (docs/ARCHITECTURE.md, "Agreement" and "The round's objects"): is the state we merged
// the swarm's, and if not, how we get back to it. Every record names the fingerprint of the state
// its peer merged for its last two rounds and the digest of the set it merged; the votes weigh
// standing (majority.h). Out of step, we first merge the majority's set again (a repair: a few
// contributions to fetch), else fetch the swarm's snapshot (a resync); a watchdog keeps either
// from waiting forever. Newcomers resync too. It alone holds the majority we follow, the snapshot
// being fetched, the repair under way and the round closed last; what it decides about the
// node's own state it asks of the node (Host). Engine thread only.
#pragma once

#include "core/node/node_config.h"
#include "core/node/node_log.h"
#include "core/node/own_record.h"
#include "core/node/peer_book.h"
#include "core/node/round_gather.h"
#include "core/node/rules/majority.h"
#include "core/node/run_folder.h"

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace es::node {

class Agreement : public QObject {
  Q_OBJECT

 public:
  // What the agreement asks of the node, whose state it is.
  class Host {
   public:
    virtual ~Host() = default;
    virtual bool trainerRunning() const = 0;
    virtual bool mergeQueued() const = 0;  // a round's merge is on its way to the trainer
    // Out of step: the round being gathered is built on the state we give up; stop gathering it,
    // and hold the trained round at the boundary until the swarm's state is here.
    virtual void holdGatheredRound() = 0;
    virtual void resumeHeldRound() = 0;  // we gave up waiting: publish the held round after all
    virtual void writeSnapshotNow() = 0;
    virtual void adoptSnapshot(const std::string& path, std::int64_t round, const ContentId& snapshot) = 0;
    virtual void remerge(std::int64_t round, const std::vector<IncomingContribution>& set,
                         const std::string& fingerprint) = 0;
    // The trainer took the swarm's snapshot of `round`: the node's state is that round's now.
    virtual void tookSnapshot(std::int64_t round, const std::string& fingerprint) = 0;
    // The exact sizes a contribution of `round`, on `baseHash`, from `sender` with `claims` may have.
    virtual FetchLimits contributionSizes(const PeerId& sender, const std::set<int>& claims, std::int64_t round,
                                          const std::string& baseHash) const = 0;
    virtual FetchLimits snapshotSizes(std::int64_t round) const = 0;
    virtual std::int64_t bytesComing() const = 0;  // what the round's fetches in flight may still bring
    virtual void ban(const PeerId& peer, const std::string& reason) = 0;
  };

  Agreement(Host& host, Swarm& swarm, PeerBook& peers, RunFolder& folder, const OwnRecord& own,
            const NodeConfig& config, const NodeLog& log);

  bool outOfStep() const { return resyncWanted_; }
  // A newcomer to a running swarm, or the merge's verdicts said most built on another base.
  void wantResync(bool majorityElsewhere);
  void tryResync();
  void checkAgreement();  // on every record and after each merge
  // The round we gather closed on the set a decided majority merged it with: the set (content
  // ids) when we hold all of it, else nothing.
  std::optional<std::set<ContentId>> swarmSetFor(const RoundGather& gather) const;
  // The round is merged: kept as the round closed last (a repair merges from it again).
  void keepClosed(RoundGather closed) { lastClosed_.emplace(std::move(closed)); }
  void stop() {
    stopped_ = true;
    watchdog_.stop();
  }

  // The swarm's events, routed here by the node. True when the content was ours to handle.
  bool fetched(const ContentId& content, const std::string& path);
  bool fetchFailed(const ContentId& content, const std::string& reason, bool refused);
  const ContentId& pendingSnapshot() const { return pending_.content; }
  // The trainer's answers.
  void snapshotAdopted(std::int64_t round, const std::string& fingerprint, const QString& error, bool contentAtFault);
  // A repair's merge landed: the majority's set merged again (the node then takes the state as
  // its own), or nothing when it was not ours or failed (then the snapshot is fetched instead).
  struct Repaired {
    int contributions = 0;
    std::string digest;  // of the set
  };
  std::optional<Repaired> remerged(std::int64_t round, const QString& error);

 private:
  struct Majority {
    std::set<PeerId> members;  // out of step: the peers whose state we take (empty: any two)
    std::string state;         // and the fingerprint of that state
    std::int64_t since = 0;    // of that round (their snapshots of it or later will do)
  };
  struct PendingSnapshot {
    ContentId content;           // being fetched for a resync
    std::int64_t round = 0;      // the round its announcers gave it
    std::int64_t doneBytes = 0;  // its bytes at the watchdog's last look
    QElapsedTimer unserved;      // running since a look found it with no bytes and no peer
    bool ours = false;           // we published it: adopted from our own file, never fetched
  };
  struct Repair {
    std::int64_t round = 0;
    std::string fingerprint, digest;  // the majority's state and set
    std::vector<IncomingContribution> have;
    std::map<ContentId, std::vector<IncomingContribution>> missing;  // content → its senders (no path yet)
    bool merging = false;
    std::int64_t doneBytes = 0;  // the missing ones' bytes at the watchdog's last look
  };
  struct Candidate {
    std::int64_t round = 0;
    ContentId content;
    int announcers = 1;
  };

  // agreement.cpp: the votes.
  struct SwarmState {
    StateGroup group;
    std::size_t ours = 0;  // peers in our own group, us included
  };
  std::optional<SwarmState> swarmStateOf(std::int64_t round, const std::string& own) const;
  std::optional<StateGroup> mergedByMajority(const RoundGather& gather) const;
  std::string majoritySetDigest(std::int64_t round, const std::set<PeerId>& members) const;
  void outOfStepIn(std::int64_t round, const StateGroup& group, const std::string& own, std::size_t ours);
  // agreement_snapshot.cpp: the resync.
  std::optional<Candidate> bestAnnouncedSnapshot() const;
  std::optional<Candidate> convergeOnLowestId();
  bool hasAnnouncers() const;
  std::int64_t newestAdoptableRound() const;
  bool startSnapshotFetch(const Candidate& candidate);
  bool adoptOwnCopy();  // the pending snapshot is one we publish: from our own file
  void fetchSnapshotAgain(const QString& why);
  void retryResyncIn(int ms);  // tryResync later, if still out of step then
  void dropPendingSnapshot(const QString& why, bool never);
  void watchResync();
  void onWatchdog();
  void giveUpResync(const QString& why, const QString& reason);  // reason: "deadline" | "unserved"
  void endResync();
  // agreement_repair.cpp: the repair.
  bool startRepair(std::int64_t round, const StateGroup& group);
  bool startRepairFetch(std::int64_t round, const ContentId& content, const std::vector<IncomingContribution>& senders);
  void repairFetched(const ContentId& content, const std::string& path);
  void runRepair();
  bool repairStalled();
  void abandonRepair(const QString& why);

  Host& host_;
  Swarm& swarm_;
  PeerBook& peers_;
  RunFolder& folder_;
  const OwnRecord& own_;
  const NodeConfig& config_;
  const NodeLog& log_;
  Majority majority_;
  bool resyncWanted_ = false;          // newcomer, or out of step with the majority
  bool majorityElsewhere_ = false;     // out of step, and ≥ 2 others share one base: wait for their snapshot
  bool waitingForMajority_ = false;    // said so once
  std::int64_t snapshotOffered_ = -1;  // the round we wrote an extra snapshot for (others disagree)
  std::int64_t gaveUpThrough_ = -1;    // splits up to this round no longer hold us (we waited)
  PendingSnapshot pending_;
  std::set<ContentId> badSnapshots_;      // refused or failed: never fetched again
  std::set<ContentId> stalledSnapshots_;  // got no bytes for a watchdog period: others first
  QTimer watchdog_;
  QElapsedTimer outOfStepSince_;  // the resync in progress started (bounds the wait)
  std::optional<RoundGather> lastClosed_;
  std::optional<Repair> repair_;
  std::int64_t repairTried_ = 0;  // a round is repaired at most once
  bool stopped_ = false;
};

}  // namespace es::node
