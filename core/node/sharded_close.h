// Issue 38 at the node: one sharded round from its close to its merge (node_sharded.cpp drives
// it). The round's contributions gathered (each peer holds its shards' files of every sender),
// the trainer reduces our shards, we publish the merged files and our index, the OutputGather
// collects every shard's output to apply, and the trainer applies them. A shard whose reducers
// disagree, or that nobody delivered by the outputs' deadline, is recomputed here: its files are
// fetched from every sender of the set and reduced by our trainer (protocol step 4). A sender an
// applied output refused is out of the round: every shard is reduced once more without it.
// Engine thread only. Header-only state; the node owns it beside the RoundGather.
#pragma once

#include "core/node/output_gather.h"
#include "core/node/output_publisher.h"
#include "core/node/trainer_worker.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace es::node {

struct ShardedClose {
  enum class Phase { Reducing, Publishing, Gathering, Refetching, Recomputing, Applying };
  std::int64_t round = 0;
  std::shared_ptr<const sync::RoundTopology> topology;
  ShardedRoundSpec spec;                        // what the trainer reduces and applies
  std::map<std::string, ContentId> inputs;      // the agreed set: sender → its contribution
  std::vector<std::string> mine;                // the shards we reduce (plan order)
  std::vector<std::string> audits;              // the shards we recompute to check their reducers (step 7)
  std::map<std::string, ContentId> ownRoots;    // shard → what we computed of it, audited or recomputed
  int verifying = 0;                            // of those, still being hashed
  std::optional<OutputGather> outputs;          // the others' outputs, once ours are published
  std::map<std::string, std::string> ownPaths;  // shard → our merged file (reduced or recomputed)
  std::vector<std::string> recomputing;         // the shards being recomputed
  std::set<ContentId> refetching;               // inputs fetched again with those shards' files
  Phase phase = Phase::Reducing;
  int outputDeadlines = 0;       // the outputs' deadlines passed this pass (two: named indexes get the second)
  int pass = 1;                  // a second one reduces the set without the refused (shard_refusals.h)
  std::string outputDir;         // this pass's merged files and index
  std::set<PeerId> refusedHere;  // senders our own reduce refused (we checked their bytes: we ban)
  bool recomputedAll = false;    // the chosen outputs could not be applied: all recomputed once
  bool takingOver = false;       // fetching the files of shards we reduce in place of absent reducers

  std::vector<std::string> reduced() const {  // ours and the audited
    auto all = mine;
    all.insert(all.end(), audits.begin(), audits.end());
    return all;
  }
  std::vector<std::string> planShards() const {
    std::vector<std::string> ids;
    for (const auto& s : topology->plan) ids.push_back(s.id);
    return ids;
  }
};

}  // namespace es::node
