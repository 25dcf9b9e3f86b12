// Issue 38, protocol step 5 at the node: what a reducer publishes once its trainer reduced its
// shards — each merged-shard file as its own torrent (honest reducers' files are the same bytes:
// one info-hash, one swarm), then its index of the round (reducer_index.h) naming each output's
// content id, published too. The caller names the index in its record (OwnRecord::outputs) and
// hands the outputs to its own OutputGather (ownOutputs). Publishing hashes off the engine thread
// (Swarm::publish); `done` runs on it once, after the last callback.
#pragma once

#include "core/node/reducer_index.h"
#include "core/node/swarm.h"

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace es::node {

struct PublishedOutputs {
  ContentId indexContent;                           // what the record's outputs[round] names
  ReducerIndex index;                               // what it says
  std::map<std::string, std::string> pathsByShard;  // our merged files, for OutputGather::ownOutputs
  std::vector<ContentId> contents;                  // everything published (to retire later)
};

// `reduced`: (shard, merged file) in plan order; the index is written to `indexDir`.
void publishOutputs(Swarm& swarm, const ReducerIndexKey& key, const std::string& inputDigest,
                    const std::vector<std::pair<std::string, std::string>>& reduced,
                    const std::vector<std::string>& planShards, const std::string& indexDir,
                    std::function<void(Expected<PublishedOutputs>)> done);

}  // namespace es::node
