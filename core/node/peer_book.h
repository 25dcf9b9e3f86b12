// What this node knows of every other peer (docs/ARCHITECTURE.md, "The round's objects"): bans,
// standing (the weight of each peer's vote: accepted work), the claims each record stated per
// round, who is waited for (no-shows, stale streaks, the silent rule's grace) and who was heard
// since our last merge. The node asks it questions and tells it what happened; it answers with
// facts (which peers changed state), and the node turns those into messages and notes. It alone
// changes this state. Engine thread only.
#pragma once

#include "core/node/rules/bans.h"
#include "core/node/rules/peer_sightings.h"
#include "core/node/rules/round_claims.h"
#include "core/node/rules/standing.h"
#include "core/node/swarm.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace es::store {
class Ledger;
}

namespace es::node {

struct ContributionVerdict;

// A peer whose announced contribution never began to arrive (not one byte by round close) this many
// rounds in a row is not waited for (nor counted as an owner) until one arrives again (issue 15, item 3).
constexpr int kNoShowRounds = 2;
constexpr int kStaleRounds = 2;  // contributions on another base in a row, while we hold the majority's state
// A no-show or stale peer whose record shows it merged our state is waited for again (liftInStep),
// at most once in this many rounds: a liar copying our fingerprint is waited for in ≤ 2 rounds of 4.
constexpr int kNoShowLiftRounds = 4;
// A sender whose transfer held a round past its deadline and still had not arrived at its close (a
// trickle, or a link that died) holds no round for this many rounds after (issue 37 item 5): a
// peer with merged work can stall one round in kHeldOverRounds + 1, not every one.
constexpr int kHeldOverRounds = 8;

class PeerBook {
 public:
  PeerBook(const Swarm& swarm, store::Ledger* ledger, int leaseRounds, std::set<PeerId> anchors);

  // The run's bans in force and the peers' standing, from the ledger. Returns the bans loaded, or
  // why they could not be read (the node goes on with what it has).
  Expected<std::size_t> load();
  // A record arrived: each peer's claims for its round (noteClaims), who changed since our last
  // merge, and (at most once a minute per peer, peer_sightings.h) the ledger's sightings.
  void noteRecords();
  void noteClaims();

  void ban(const PeerId& peer, const std::string& reason);
  bool isBanned(const PeerId& peer) const;  // and the ban has not expired

  const Standing& standing() const { return standing_; }
  // The weights of a vote on the state `round` was merged into: the standing from before we
  // merged it (node_agreement: counting the round itself tilts a split in it).
  const Standing& standingBefore(std::int64_t round) const;
  // The round is merged: each accepted sender's standing grows by one.
  void noteAccepted(std::int64_t round, const std::vector<ContributionVerdict>& verdicts);
  // Whether we merged `peer`'s contribution to `round` (one of our last 3 merges): a say in the
  // vote on that round's state (Agreement::swarmStateOf). Naming a contribution is not enough.
  bool acceptedIn(std::int64_t round, const PeerId& peer) const;

  // Whether `peer` has work we merged (or is an anchor): its transfers may hold a round past the
  // deadline (mayHold: and it held none in vain lately) and it counts in the cut-off test.
  bool hasMergedWork(const PeerId& peer) const { return voteWeight(standing_, peer) > 1; }
  // Whether we ever merged the work of a peer other than `self` (anchors aside): before that, as
  // in a run's first round or a newcomer's, no peer can be told from a fresh key.
  bool anyMergedWork(const PeerId& self) const;
  bool mayHold(const PeerId& peer, std::int64_t round) const;
  void noteHeldOver(const std::set<PeerId>& senders, std::int64_t round);

  // What `peer`'s records stated for `round`, or nullopt when none of that round was seen.
  std::optional<std::set<int>> claimsIn(const PeerId& peer, std::int64_t round) const;

  // Claims, a lease that holds at `round`, not banned, not silent (peer_rules.h). Without
  // `withExcluded`, peers whose announced contributions did not arrive kNoShowRounds rounds in a
  // row, or were stale kStaleRounds rounds in a row while we held the majority's state, are left
  // out too (they are still fetched from, so they come back at once).
  std::vector<SwarmPeer> livePeers(std::int64_t round, bool withExcluded = false) const;

  // At round close: `arrived` and `serving` (bytes came) start again from zero; each of `missing`
  // is one round nearer to not being waited for. Returns those that reached kNoShowRounds now.
  std::vector<PeerId> countNoShows(const std::set<PeerId>& arrived, const std::set<PeerId>& serving,
                                   const std::set<PeerId>& missing);
  // Excluded peers whose record says they merged `ours` (our state of `mergedRound`) are waited
  // for again in `round`, at most once every kNoShowLiftRounds rounds. Returns those lifted now.
  std::vector<PeerId> liftInStep(std::int64_t round, std::int64_t mergedRound, const std::string& ours);
  // After a merge in step with the swarm: returns the senders whose stale streak reached kStaleRounds.
  std::vector<PeerId> countStale(const std::vector<ContributionVerdict>& verdicts, const PeerId& self);

  // Peers joining: a record without claims (they announce one as their join window opens), first
  // seen less than `windowMs` ago, not banned. A run's first round waits for them (Node::gather).
  std::vector<PeerId> joiningPeers(std::int64_t windowMs) const;

  // Whether `peer`'s record changed since our last merge; startHearing() at each merge.
  bool heardSinceMerge(const PeerId& peer) const { return heard_.count(peer) > 0; }
  void startHearing();

 private:
  bool staleOut(const PeerId& peer) const;
  void noteHeard(const std::vector<SwarmPeer>& peers);

  const Swarm& swarm_;
  store::Ledger* ledger_ = nullptr;
  int leaseRounds_ = 1;
  std::set<PeerId> anchors_;                     // weigh the cap from the start (standing.h)
  Bans banned_;                                  // peer id → when and why (expired ones are ignored: isBanned)
  Standing standing_;                            // peer id → rounds we merged its contribution: its vote's weight
  std::map<std::int64_t, Standing> standingAt_;  // round → standing_ before we merged it (the last 3 rounds)
  std::map<std::int64_t, std::set<PeerId>> acceptedAt_;  // round → the senders we merged in it (the last 3)
  PeerSightings sightings_;                              // which peers the ledger has seen, and when
  RoundClaims roundClaims_;                              // each peer's claims per round, from its records
  // Peer id → the round we first saw it claiming: the grace of the silent rule (peer_rules.h).
  // Filled as livePeers meets them, hence mutable. Peers may differ by a round on a newcomer's
  // grace (they met it at different times); they agree again once it publishes or stays silent.
  mutable std::map<PeerId, std::int64_t> claimingSince_;
  std::map<PeerId, int> noShows_;                // sender → rounds in a row its announced contribution sent no byte
  std::map<PeerId, std::int64_t> noShowLifted_;  // sender → the round we last waited for it again (in step)
  std::map<PeerId, std::int64_t> heldOver_;      // sender → the last round it held past the deadline in vain
  std::map<PeerId, int> staleStreak_;            // sender → rounds in a row its contribution was stale (we in step)
  std::map<PeerId, std::int64_t> lastSeq_;       // peer → the seq of its record we saw last
  std::set<PeerId> heard_;                       // records that changed since our last merge
  std::map<PeerId, std::int64_t> joiningSince_;  // peer → when we first saw its record without claims
};

}  // namespace es::node
