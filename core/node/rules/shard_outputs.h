// Issue 38, design item 4: which reducers' output of one shard a peer applies. Each shard of a
// sharded round has its reducers in a fixed order (sync/reducer_plan.h: the first `replicas`
// reduce it, the rest replace, in order, those that do not deliver); each reducer signs in its
// record, per shard, the digest of the contributions it reduced (merged_set.h's digest) and the
// content id of the merged shard it seeds. For the round's agreed input set a peer
//   - applies a merged shard once every reducer it waits for (the first `replicas` of the order
//     it has not given up on) published the same output;
//   - recomputes the shard itself from the content-addressed inputs when any two outputs from
//     the order differ (or one reducer published two), and then bans those whose output is not
//     what it computed (`outputLiars`): their signed record is the proof, which any peer can check
//     by the same recomputation;
//   - recomputes when the order is used up (every reducer given up on), and waits otherwise.
// Outputs from peers outside the order do not count: a fresh key cannot force recomputations.
// R colluding reducers that all publish one wrong shard pass this rule; each peer's audit of a
// random shard a round, and the fingerprint vote, are what catch them (docs/ARCHITECTURE.md,
// "Sharded reduction").
// Pure functions, no Qt, no Torch.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace es::node {

struct ShardOutput {
  std::string reducer;      // peer id
  std::string inputDigest;  // the set it reduced (mergedSetDigest)
  std::string outputRoot;   // the merged shard's content id
};

enum class ShardVerdict { Wait, Apply, Recompute };

struct ShardDecision {
  ShardVerdict verdict = ShardVerdict::Wait;
  std::string outputRoot;              // Apply: the output to fetch and apply
  std::vector<std::string> waitingOn;  // Wait: the reducers whose output is missing, in order
};

// The reducers waited for: the first `replicas` of `order` not in `gaveUp`.
std::vector<std::string> activeReducers(const std::vector<std::string>& order, int replicas,
                                        const std::set<std::string>& gaveUp);

// The decision for one shard and the agreed input set `digest`; `outputs` as heard (any order,
// duplicates allowed; those for another digest are ignored).
ShardDecision decideShard(const std::vector<std::string>& order, int replicas, const std::set<std::string>& gaveUp,
                          const std::vector<ShardOutput>& outputs, const std::string& digest);

// After recomputing the shard to `root`: the reducers of `order` that published another output
// for `digest` (sorted, each once).
std::vector<std::string> outputLiars(const std::vector<std::string>& order, const std::vector<ShardOutput>& outputs,
                                     const std::string& digest, const std::string& root);

}  // namespace es::node
