#include "core/node/output_gather.h"

#include "core/node/rules/shard_outputs.h"
#include "core/node/sharded_fetch.h"
#include "core/sync/merged_shard_file.h"
#include "core/sync/shard_figures_file.h"

#include <algorithm>

namespace es::node {

OutputGather::OutputGather(Swarm& swarm, std::string fetchDir, Spec spec)
    : swarm_(swarm),
      fetchDir_(std::move(fetchDir)),
      spec_(std::move(spec)),
      applied_(spec_.plan.size()),
      recompute_(spec_.plan.size(), false) {}

void OutputGather::ownOutputs(const ReducerIndex& index, const std::map<std::string, std::string>& pathsByShard) {
  heard_[index.key.reducer.str()] = index.outputs;
  for (const auto& out : index.outputs)
    if (const auto path = pathsByShard.find(out.shard); path != pathsByShard.end())
      outputPaths_[out.output.str()] = path->second;
  decide();
}

std::set<std::string> OutputGather::waitingOn() const {
  std::set<std::string> waiting;
  for (const auto& order : spec_.orders)
    for (const auto& reducer : activeReducers(order, spec_.replicas, gaveUp_))
      if (!heard_.count(reducer)) waiting.insert(reducer);
  return waiting;
}

// Only the waited-for reducers' indexes are fetched: outputs from outside the orders do not count
// (decideShard), so a key cannot make us fetch anything by naming an index.
void OutputGather::pass(const std::vector<SwarmPeer>& peers) {
  // A reducer whose record names another index than the one we read (its second pass) is heard
  // again: what it said for another input set does not count (decideShard) and would keep it
  // "heard" for good.
  for (const auto& p : peers) {
    const auto named = p.announced.outputs.find(spec_.key.round);
    const auto read = heardFrom_.find(p.id.str());
    if (named != p.announced.outputs.end() && read != heardFrom_.end() && read->second != named->second) {
      heard_.erase(read->first);
      heardFrom_.erase(read);
    }
  }
  const auto waiting = waitingOn();
  for (const auto& p : peers) {
    const std::string reducer = p.id.str();
    if (!waiting.count(reducer) || indexFetches_.count(reducer)) continue;
    if (const auto index = p.announced.outputs.find(spec_.key.round); index != p.announced.outputs.end())
      fetchIndex(reducer, index->second);
  }
  decide();
}

void OutputGather::fetchIndex(const std::string& reducer, const ContentId& content) {
  const std::string dir = fetchDir_ + "/outputs-" + std::to_string(spec_.key.round) + "/" + content.str();
  if (!swarm_.fetch(content, dir, reducerIndexLimits(spec_.key.round, spec_.plan.size()))) return;
  indexFetches_[reducer] = content;
  fetches_.insert(content);
}

void OutputGather::readIndex(const std::string& reducer, const std::string& path) {
  auto key = spec_.key;
  key.reducer = PeerId(reducer);
  std::vector<std::string> shards;
  for (const auto& s : spec_.plan) shards.push_back(s.id);
  auto index = loadReducerIndex(path, key, shards);
  if (!index) {
    refused_[reducer] = index.error();
    gaveUp_.insert(reducer);  // it will not deliver: the next of its orders is waited for
    return;
  }
  heard_[reducer] = index->outputs;
}

std::set<std::string> OutputGather::sendersOf(const sync::Shard& shard) const {
  std::set<std::string> senders;
  for (const auto& [sender, claims] : spec_.inputs)
    if (sync::carriesShard(shard, claims)) senders.insert(sender);
  return senders;
}

std::vector<ShardOutput> OutputGather::outputsFor(std::size_t s) const {
  std::vector<ShardOutput> outputs;
  for (const auto& [reducer, listed] : heard_)
    for (const auto& out : listed)
      if (out.shard == spec_.plan[s].id) outputs.push_back({reducer, out.inputs, out.output.str()});
  return outputs;
}

void OutputGather::decide() {
  for (std::size_t s = 0; s < spec_.plan.size(); ++s) {
    if (!applied_[s].empty()) continue;  // decided: its output is here or on its way
    const auto d = decideShard(spec_.orders[s], spec_.replicas, gaveUp_, outputsFor(s), spec_.inputDigest);
    // An agreed output that would not come in kFetchTries is recomputed as a disagreement is.
    recompute_[s] =
        d.verdict == ShardVerdict::Recompute || (d.verdict == ShardVerdict::Apply && unfetchable_.count(d.outputRoot));
    if (d.verdict == ShardVerdict::Apply && !recompute_[s]) {
      applied_[s] = d.outputRoot;
      fetchOutput(s, d.outputRoot);
    }
  }
}

void OutputGather::fetchOutput(std::size_t s, const std::string& root) {
  if (outputPaths_.count(root) || outputFetches_.count(root)) return;
  const auto& shard = spec_.plan[s];
  const sync::MergedShardKey key{spec_.key.run, spec_.key.round, spec_.key.baseHash, shard.id, spec_.inputDigest};
  const std::string dir = fetchDir_ + "/outputs-" + std::to_string(spec_.key.round) + "/" + root;
  if (swarm_.fetch(ContentId(root), dir, mergedShardLimits(shard, key, sendersOf(shard)))) {
    outputFetches_[root] = s;
    fetches_.insert(ContentId(root));
  } else {
    applied_[s].clear();  // decided again on the next pass
  }
}

bool OutputGather::fetched(const ContentId& content, const std::string& path) {
  for (auto it = indexFetches_.begin(); it != indexFetches_.end(); ++it) {
    if (it->second != content) continue;
    const std::string reducer = it->first;
    heardFrom_[reducer] = it->second;
    indexFetches_.erase(it);
    readIndex(reducer, path);
    decide();
    return true;
  }
  if (outputFetches_.erase(content.str()) == 0) return false;
  outputPaths_[content.str()] = path;
  return true;
}

// A refused index or output (its metadata broke the limits the set allows) was named by the
// reducers that published it: each is refused and replaced, and the shard decided again. A fetch
// that failed otherwise (the disk; libtorrent 2.0.8's hybrid "v1 and v2 hashes do not describe the
// same data", seen on 8 peers) is dropped with its partial file and asked again, as RoundGather
// does — a transfer the swarm still holds would never report again (SwarmSession::fetch). After
// kFetchTries an index's reducer is given up, an output's shard recomputed from its inputs.
bool OutputGather::failed(const ContentId& content, const std::string& reason, bool refused) {
  const auto index = std::find_if(indexFetches_.begin(), indexFetches_.end(),
                                  [&](const auto& fetch) { return fetch.second == content; });
  const auto output = outputFetches_.find(content.str());
  if (index == indexFetches_.end() && output == outputFetches_.end()) return false;
  if (!refused) swarm_.retire(content, true);
  const bool exhausted = !refused && ++failures_[content.str()] >= kFetchTries;
  if (index != indexFetches_.end()) {
    if (refused) refused_[index->first] = reason;
    if (refused || exhausted) gaveUp_.insert(index->first);
    indexFetches_.erase(index);  // otherwise fetched again on the next pass
    decide();
    return true;
  }
  const std::size_t s = output->second;
  outputFetches_.erase(output);
  if (refused)
    for (const auto& [reducer, listed] : heard_)
      for (const auto& out : listed)
        if (out.shard == spec_.plan[s].id && out.output == content) refused_[reducer] = reason, gaveUp_.insert(reducer);
  if (exhausted) unfetchable_.insert(content.str());
  applied_[s].clear();
  decide();
  return true;
}

void OutputGather::giveUp(const std::string& reducer) {
  gaveUp_.insert(reducer);
  decide();
}

std::set<std::string> OutputGather::giveUpOnUndelivered(bool evenNamed) {
  std::set<std::string> gaveUp;
  for (bool more = true; more;) {
    more = false;
    for (std::size_t s = 0; s < spec_.plan.size(); ++s) {
      if (!applied_[s].empty() || recompute_[s]) continue;
      const auto d = decideShard(spec_.orders[s], spec_.replicas, gaveUp_, outputsFor(s), spec_.inputDigest);
      for (const auto& reducer : d.waitingOn) {
        if (!evenNamed && indexFetches_.count(reducer)) continue;
        if (gaveUp_.insert(reducer).second) more = gaveUp.insert(reducer).second || more;
      }
    }
    decide();
  }
  return gaveUp;
}

int OutputGather::abandonUnarrived() {
  int abandoned = 0;
  for (std::size_t s = 0; s < spec_.plan.size(); ++s) {
    if (applied_[s].empty() || outputPaths_.count(applied_[s])) continue;
    swarm_.retire(ContentId(applied_[s]), true);
    outputFetches_.erase(applied_[s]);
    unfetchable_.insert(applied_[s]);
    applied_[s].clear();
    ++abandoned;
  }
  decide();
  return abandoned;
}

bool OutputGather::complete() const {
  return std::all_of(applied_.begin(), applied_.end(),
                     [this](const std::string& root) { return !root.empty() && outputPaths_.count(root); });
}

std::vector<std::string> OutputGather::appliedPaths() const {
  std::vector<std::string> paths;
  if (!complete()) return paths;
  for (const auto& root : applied_) paths.push_back(outputPaths_.at(root));
  return paths;
}

std::string OutputGather::appliedPath(std::size_t shard) const {
  if (shard >= applied_.size() || applied_[shard].empty()) return {};
  const auto path = outputPaths_.find(applied_[shard]);
  return path == outputPaths_.end() ? std::string() : path->second;
}

std::vector<std::string> OutputGather::liarsAgainst(const std::string& shard, const std::string& root) const {
  for (std::size_t s = 0; s < spec_.plan.size(); ++s)
    if (spec_.plan[s].id == shard) return outputLiars(spec_.orders[s], outputsFor(s), spec_.inputDigest, root);
  return {};
}

bool OutputGather::decided(const std::string& shard) const {
  for (std::size_t s = 0; s < spec_.plan.size(); ++s)
    if (spec_.plan[s].id == shard) return !applied_[s].empty() || recompute_[s];
  return false;
}

std::vector<ContentId> OutputGather::contents() const { return {fetches_.begin(), fetches_.end()}; }

std::vector<std::string> OutputGather::toRecompute() const {
  std::vector<std::string> shards;
  for (std::size_t s = 0; s < spec_.plan.size(); ++s)
    if (recompute_[s]) shards.push_back(spec_.plan[s].id);
  return shards;
}

}  // namespace es::node
