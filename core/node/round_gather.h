// One round's gathering (docs/ARCHITECTURE.md, "The round's objects"): what this round expects,
// fetches and has. Every live peer's announced contribution is fetched; the node closes the round
// once every expected one arrived, or at its deadline. It alone holds the round's one map of
// sender → contribution (ours joins it at close), and the transfers those contributions come by;
// after the merge the node keeps it as the round closed last (a repair merges from it again).
// Engine thread only; it fetches and retires through the Swarm, within the RunFolder's quota.
#pragma once

#include "core/node/node_log.h"
#include "core/node/run_folder.h"
#include "core/node/swarm.h"
#include "core/node/trainer_worker.h"

#include <QElapsedTimer>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace es::node {

// Fetches of others' contributions in flight at once; the rest wait for a slot.
constexpr int kMaxConcurrentFetches = 8;
// A fetch that brought no byte this long after it started (an id announced and never served: a
// ghost) goes on, but no longer holds one of the slots (issue 37 item 3: eight ghosts held all 8
// for the whole round and every honest peer merged alone) — or a third of the round's shortest
// deadline, when that is sooner: a slot freed after the round closed frees nothing. One that
// brings bytes holds its slot twice as long, no longer (a trickle never finishes). The quota
// still counts both.
constexpr qint64 kSilentFetchMs = 20000;

class RoundGather {
 public:
  // A sender's contribution to the round, as its record named it. Keyed by sender: a peer that
  // names another's content id as its own does not take over that sender's entry — the one
  // transfer serves both, and validation (the file names its sender) rejects the impostor.
  struct Contribution {
    ContentId content;
    std::set<int> claims;  // what its record stated for this round (validation uses what held then)
    // No record of the round was seen: the claims are a guess (the record's newer ones), so a
    // size that does not match them is no proof of a lie (no ban).
    bool claimsGuessed = false;
  };
  // The exact sizes a sender's contribution of this round may have, given its claims.
  using SizesOf = std::function<FetchLimits(const PeerId& sender, const std::set<int>& claims)>;
  struct Deadline {
    double minSeconds = 0, maxSeconds = 0;
    double freshSeconds = 0;  // how long fresh keys may hold the round (RoundTimes::freshDeadlineSeconds)
  };

  RoundGather(Swarm& swarm, RunFolder& folder, const NodeLog& log, RoundTrained own, const PeerId& self,
              SizesOf sizesOf, Deadline deadline);

  std::int64_t round() const { return own_.round; }
  const RoundTrained& own() const { return own_; }
  double elapsedSeconds() const { return clock_.elapsed() / 1000.0; }

  // The peers waited for this round (us included): the node sets them on every pass.
  void expect(std::set<PeerId> peers) { expected_ = std::move(peers); }
  const std::set<PeerId>& expected() const { return expected_; }
  bool hasArrived(const PeerId& sender) const { return arrived_.count(sender) > 0; }
  const std::map<PeerId, IncomingContribution>& arrived() const { return arrived_; }
  using PeerTest = std::function<bool(const PeerId&)>;
  // Every expected peer that `waitedFor` arrived (or was given up), none of them on another base.
  bool complete(const std::set<PeerId>& onAnotherBase, const PeerTest& waitedFor) const;
  // The senders whose transfer is in flight and brought no byte in silentAfterMs() or more (an id
  // announced and never served). Reads the swarm's traffic.
  std::set<PeerId> silentSenders() const;
  // A third of the deadline's minimum, at most kSilentFetchMs.
  qint64 silentAfterMs() const;
  // Milliseconds until fresh keys hold the round no longer: Deadline::freshSeconds, and at least
  // silentAfterMs() (a newcomer's contribution follows its merge of the round before: records to
  // hear, a merge to run — on a run of short training rounds that lag is no fraction of them;
  // tst_node_rounds aLatePeerClosesTheRoundOnTheSetTheOthersMerged). ≤ 0: past it.
  qint64 msUntilFreshDeadline() const {
    return std::max(qint64(deadline_.freshSeconds * 1000), silentAfterMs()) - clock_.elapsed();
  }

  void arrive(IncomingContribution contribution) { arrived_[contribution.sender] = std::move(contribution); }  // ours
  // `sender`'s record names `contribution`. True if its bytes are here already (fetched for
  // another announcer): the node then calls fetched() for it.
  bool announced(const PeerId& sender, Contribution contribution);
  bool names(const PeerId& sender, const ContentId& content) const;
  // A peer that resynced mid-round announces a new contribution for it: the one it announced last
  // is the one to merge (`current`; empty: it withdrew the round), the others are dropped.
  void supersede(const PeerId& sender, const ContentId& current);
  // Starts the transfer of each wanted (sender, content), the heaviest sender first (`weightOf`: 1 + work
  // we merged), ties in an order of ours no key can be ground for (a keyed hash with a secret of
  // this gather): keys ground to sort first took every slot when fetches went in key order. While
  // `heavyLive` (a live peer whose work we merged), senders without such work share half the slots:
  // their fetches, started before a heavier peer announced, held every slot of the round.
  // Returns how many wait for a slot (or the quota).
  int startFetches(std::vector<std::pair<PeerId, ContentId>> wanted,
                   const std::function<std::int64_t(const PeerId&)>& weightOf, bool heavyLive);
  // Milliseconds until a fetch in flight may free its slot (slotsHeld); −1: none will.
  qint64 msUntilASlotFrees() const;
  // The bytes of `content` are here: a contribution of every sender that names it. False if no
  // transfer of this round is waiting for them.
  bool fetched(const ContentId& content, const std::string& path);
  // A transfer error: true if it should be started again (at most 3 times); false when given up
  // or not a transfer of this round.
  bool failed(const ContentId& content);
  // The content broke its limits (see Refusal).
  struct Refusal {
    enum Kind { NotOurs, Retry, Guessed, Liars } kind = NotOurs;
    std::set<PeerId> senders;
  };
  Refusal refused(const ContentId& content);
  std::int64_t bytesComing() const;  // the most the transfers in flight may still bring

  // The deadline's questions (node_gather.cpp). Past its deadline a round is held only for the
  // senders `mayHold` names (Node::onDeadline: work we merged, once anyone's can be told apart;
  // issue 37 item 5) — a fresh key trickling bytes held every round to max_seconds.
  bool fetchesProgressing(const PeerTest& mayHold);
  // True when we heard from fewer than half of the other expected peers (≥ 2) that `counts` since
  // our last merge.
  bool cutOff(const PeerTest& heardSinceMerge, const PeerTest& counts);
  // The senders whose transfer held the round past its deadline and had still not arrived (at close).
  std::set<PeerId> heldOver() const;
  // At close: the senders whose transfer started and sent no byte (or named a malformed id), and
  // those whose bytes began to arrive.
  struct Attendance {
    std::set<PeerId> serving, missing;
  };
  Attendance attendance() const;

  // The round closes: our own contribution (`ownContent`) joins the map; `only` (optional) keeps the
  // merge to those content ids. Returns what to merge.
  std::vector<IncomingContribution> close(bool deadline, const ContentId& ownContent, const std::set<ContentId>* only);
  bool closing() const { return closing_; }
  bool deadlineHit() const { return deadlineHit_; }
  double gatherSeconds() const { return gatherSeconds_; }
  // Each merged sender's claims, taken at close: a contribution that arrives during the merge
  // joins `arrived` (a repair may use it) but not the ledger's rows.
  const std::map<PeerId, std::set<int>>& mergedClaims() const { return mergedClaims_; }
  std::map<PeerId, ContentId> contentOf() const;  // sender → its contribution
  const std::map<PeerId, Contribution>& contributions() const { return contributions_; }
  std::optional<std::string> pathOf(const ContentId& content) const;  // once fetched (ours: at close)
  // The round is merged: what did not arrive by now is of no use (a never-seeded torrent would
  // otherwise re-announce until it is retired two rounds later). Its partial file goes with it.
  void retireUnarrived();

 private:
  struct Transfer {
    FetchLimits limits;     // the sizes it was started with
    bool inFlight = false;  // started and neither fetched nor failed yet
    bool light = false;     // started in the share of senders without merged work (startFetches)
    std::string path;       // once fetched
    // Its progress at the deadline's last look (fetchesProgressing).
    std::int64_t bytes = 0;
    qint64 atMs = 0, startedMs = 0;
  };
  FetchLimits limitsFor(const ContentId& content) const;  // every announcer's sizes
  std::set<PeerId> sendersOf(const ContentId& content) const;
  bool named(const ContentId& content) const { return !sendersOf(content).empty(); }
  // The fetches holding a slot, all and of the light share: in flight, not silent past
  // silentAfterMs(), and younger than twice that. Counted once a pass (the swarm's traffic is
  // read at most once).
  struct Slots {
    int all = 0, light = 0;
  };
  Slots slotsHeld() const;
  // Starts the transfer of `content`, or not yet: false when kMaxConcurrentFetches are in flight
  // (half of them when `lightShare`: see startFetches) or the quota does not allow it (the node
  // asks again on every event). One transfer per content id, whoever announced it, with every
  // announcer's sizes. Already started or fetched: false. A started one takes its slot in `slots`.
  bool startFetch(const ContentId& content, bool lightShare, Slots& slots);

  Swarm& swarm_;
  RunFolder& folder_;
  const NodeLog& log_;
  RoundTrained own_;
  PeerId self_;
  SizesOf sizesOf_;
  Deadline deadline_;
  std::map<PeerId, Contribution> contributions_;
  std::set<PeerId> expected_;
  std::set<PeerId> givenUp_;  // senders not waited for any more this round (their content was refused)
  std::map<PeerId, IncomingContribution> arrived_;
  std::map<PeerId, std::set<int>> mergedClaims_;
  std::map<ContentId, Transfer> transfers_;  // started (and never started again unless erased)
  QElapsedTimer clock_;
  std::uint64_t fetchOrderSecret_ = 0;  // startFetches' tie order
  std::set<PeerId> heldBy_;             // senders whose transfer's progress held the round past its deadline
  bool cutOffSaid_ = false, closing_ = false, deadlineHit_ = false;
  double gatherSeconds_ = 0;
};

}  // namespace es::node
