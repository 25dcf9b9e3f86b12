// Issue 38, protocol steps 5–6 at the node: one sharded round's outputs as a peer gathers them.
// Each waited-for reducer's record names its index of the round (`outputs[round]`); the peer
// fetches it (sharded_fetch.h's limits), reads it strictly (reducer_index.h: its round, state and
// reducer), decides each shard by the rule (shard_outputs.h's decideShard over the indexes heard)
// and fetches the merged shard it applies — one content, however many reducers seed it. Done when
// every shard's output to apply is here; a shard whose reducers disagree is to be recomputed
// from its inputs (the node's, with the trainer); a reducer whose index breaks its format is
// refused (its signed record named those bytes: a ban on bytes we checked ourselves).
// Engine thread only; fetches through the Swarm, events routed here by the node. Its fetches (a
// reducer index is ≤ 512 + 160 bytes a shard, a merged shard its float32 rows) are not counted
// against RunFolder's quota yet, nor retired: the node's wiring must do both.
#pragma once

#include "core/node/reducer_index.h"
#include "core/node/rules/shard_outputs.h"
#include "core/node/swarm.h"
#include "core/sync/shard_plan.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace es::node {

class OutputGather {
 public:
  static constexpr int kFetchTries = 3;  // an index or output that fails (not refused) this often is given up
  struct Spec {
    ReducerIndexKey key;                          // run, round, base (reducer: set per index)
    std::string inputDigest;                      // the agreed input set's (shard_refusals.h)
    std::map<std::string, std::set<int>> inputs;  // its senders → their claims (who carries which shard)
    std::vector<sync::Shard> plan;
    std::vector<std::vector<std::string>> orders;  // per plan shard (round_topology.h)
    int replicas = 3;
  };
  OutputGather(Swarm& swarm, std::string fetchDir, Spec spec);

  // Our own outputs: their files are here (shard → path), their content ids in our index.
  void ownOutputs(const ReducerIndex& index, const std::map<std::string, std::string>& pathsByShard);
  // A merged shard we computed ourselves (audited, recomputed) and seed: here, never fetched —
  // the session answers a fetch of what it publishes with nothing, and dropping that "fetch" at
  // the last deadline removed our own file (applyShards: "cannot open", 8 processes).
  void ownCopy(const ContentId& root, const std::string& path) { outputPaths_[root.str()] = path; }
  // A pass over the reducers' records: fetches each waited-for reducer's named index, then
  // decides every shard and fetches the outputs to apply.
  void pass(const std::vector<SwarmPeer>& peers);
  // Transfer events: false when the content is not one of this gather's. A failed fetch that was
  // not refused is dropped and asked again (kFetchTries in all).
  bool fetched(const ContentId& content, const std::string& path);
  bool failed(const ContentId& content, const std::string& reason, bool refused);
  // A reducer not waited for any more (the node's deadline): the next of each order replaces it.
  void giveUp(const std::string& reducer);
  // Past the outputs' deadline: every reducer an undecided shard still waits on is given up, and
  // the replacements after it in turn, so each shard ends applied or to recompute — except, unless
  // `evenNamed`, one whose named index is on its way (published, not here yet: on 8 loaded
  // processes an index named at +10 s was not here at +15 s, and every peer recomputed its shards).
  // → those given up.
  std::set<std::string> giveUpOnUndelivered(bool evenNamed);
  // Past the last deadline: the chosen outputs not here yet are dropped and their shards
  // recomputed (a transfer that stalls must not hold the round). → how many.
  int abandonUnarrived();

  bool complete() const;                             // every shard's applied output is here
  std::vector<std::string> appliedPaths() const;     // plan order, when complete
  std::string appliedPath(std::size_t shard) const;  // the plan shard's output file here ("" not yet)
  std::vector<ContentId> contents() const;           // every index and output fetched (to retire)
  std::vector<std::string> toRecompute() const;      // shards whose outputs disagree (or none is left)
  const std::map<std::string, std::string>& refusedReducers() const { return refused_; }  // reducer → why
  std::set<std::string> waitingOn() const;  // reducers whose index is awaited
  // The reducers of `shard`'s order whose output for the set is not `root` (what we computed
  // ourselves: an audit, a recomputation) — outputLiars over what we heard.
  std::vector<std::string> liarsAgainst(const std::string& shard, const std::string& root) const;
  bool decided(const std::string& shard) const;  // applied or to recompute: its reducers were heard

 private:
  void fetchIndex(const std::string& reducer, const ContentId& content);
  void readIndex(const std::string& reducer, const std::string& path);
  void decide();
  std::vector<ShardOutput> outputsFor(std::size_t shard) const;  // as heard
  void fetchOutput(std::size_t shard, const std::string& root);
  std::set<std::string> sendersOf(const sync::Shard& shard) const;

  Swarm& swarm_;
  std::string fetchDir_;
  Spec spec_;
  std::set<std::string> gaveUp_;
  std::map<std::string, ContentId> indexFetches_;            // reducer → its index in flight
  std::map<std::string, ContentId> heardFrom_;               // reducer → the index its heard_ entry read
  std::map<std::string, std::vector<ReducedOutput>> heard_;  // reducer → its index's outputs
  std::map<std::string, std::string> refused_;               // reducer → why its index was refused
  std::map<std::string, std::string> outputPaths_;           // output content id → its file here
  std::map<std::string, std::size_t> outputFetches_;         // output content id → a shard it is for
  std::set<ContentId> fetches_;                              // every fetch started
  std::map<std::string, int> failures_;                      // content id → its fetches that failed
  std::set<std::string> unfetchable_;                        // outputs that failed kFetchTries times
  std::vector<std::string> applied_;                         // per plan shard: the output to apply
  std::vector<bool> recompute_;                              // per plan shard
};

}  // namespace es::node
