#include "core/node/rules/shard_outputs.h"

#include <algorithm>
#include <map>

namespace es::node {
namespace {

// The roots each reducer of `order` published for `digest`.
std::map<std::string, std::set<std::string>> rootsByReducer(const std::vector<std::string>& order,
                                                            const std::vector<ShardOutput>& outputs,
                                                            const std::string& digest) {
  const std::set<std::string> inOrder(order.begin(), order.end());
  std::map<std::string, std::set<std::string>> roots;
  for (const auto& o : outputs)
    if (o.inputDigest == digest && inOrder.count(o.reducer)) roots[o.reducer].insert(o.outputRoot);
  return roots;
}

}  // namespace

std::vector<std::string> activeReducers(const std::vector<std::string>& order, int replicas,
                                        const std::set<std::string>& gaveUp) {
  std::vector<std::string> active;
  for (const auto& peer : order) {
    if (int(active.size()) >= replicas) break;
    if (!gaveUp.count(peer)) active.push_back(peer);
  }
  return active;
}

ShardDecision decideShard(const std::vector<std::string>& order, int replicas, const std::set<std::string>& gaveUp,
                          const std::vector<ShardOutput>& outputs, const std::string& digest) {
  ShardDecision d;
  const auto roots = rootsByReducer(order, outputs, digest);
  std::set<std::string> all;
  for (const auto& [reducer, rs] : roots) all.insert(rs.begin(), rs.end());
  if (all.size() > 1) {  // two outputs differ, or one reducer published two
    d.verdict = ShardVerdict::Recompute;
    return d;
  }
  const auto active = activeReducers(order, replicas, gaveUp);
  if (active.empty()) {
    d.verdict = ShardVerdict::Recompute;
    return d;
  }
  for (const auto& peer : active)
    if (!roots.count(peer)) d.waitingOn.push_back(peer);
  if (!d.waitingOn.empty()) return d;
  d.verdict = ShardVerdict::Apply;
  d.outputRoot = *all.begin();
  return d;
}

std::vector<std::string> outputLiars(const std::vector<std::string>& order, const std::vector<ShardOutput>& outputs,
                                     const std::string& digest, const std::string& root) {
  std::vector<std::string> liars;
  for (const auto& [reducer, rs] : rootsByReducer(order, outputs, digest))
    if (rs.size() > 1 || *rs.begin() != root) liars.push_back(reducer);
  return liars;  // the map's order: sorted, each once
}

}  // namespace es::node
