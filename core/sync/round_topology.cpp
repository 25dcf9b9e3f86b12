#include "core/sync/round_topology.h"

#include "core/sync/reducer_plan.h"
#include "core/sync/reduction_bytes.h"

#include <algorithm>

namespace es::sync {

std::vector<std::string> RoundTopology::shardsReducedBy(const std::string& peer, int replicas) const {
  std::vector<std::string> out;
  for (std::size_t s = 0; s < plan.size() && s < orders.size(); ++s) {
    const auto& order = orders[s];
    const auto end = order.begin() + std::min<std::ptrdiff_t>(replicas, std::ptrdiff_t(order.size()));
    if (std::find(order.begin(), end, peer) != end) out.push_back(plan[s].id);
  }
  return out;
}

RoundTopology RoundTopology::withReducersAmong(const std::set<std::string>& senders) const {
  RoundTopology t = *this;
  for (auto& order : t.orders) {
    std::vector<std::string> kept;
    for (const auto& peer : order)
      if (senders.count(peer)) kept.push_back(peer);
    if (!kept.empty()) order = std::move(kept);
  }
  return t;
}

RoundTopology roundTopology(const model::ModelConfig& config, const WorkLedger& ledger,
                            const std::map<int, std::set<std::string>>& owners, const std::string& seed,
                            const ReductionPolicy& policy, bool denseCodec) {
  RoundTopology t;
  const auto candidates = reducerCandidates(ledger);
  const int n = int(candidates.size());
  const std::string counted = std::to_string(n) + " senders with merged work";
  if (!denseCodec) {
    t.why = "all-to-all: the run's codec is sparse";
    return t;
  }
  const bool forced = policy.shardFrom > 0;
  const bool shard =
      forced ? n >= policy.shardFrom && n > policy.replicas : shardingPays(config, n, policy.replicas, policy.audits);
  if (!shard) {
    t.why = "all-to-all: " + counted +
            (forced ? " (the run shards from " + std::to_string(std::max(policy.shardFrom, policy.replicas + 1)) + ")"
                    : " (sharding pays from more, for this model)");
    return t;
  }
  t.sharded = true;
  t.shardElements = shardElementsFor(config, n);
  t.plan = planShards(config, t.shardElements);
  t.orders = assignReducers(t.plan, candidates, owners, seed, policy.replicas);
  t.why = "sharded: " + counted + ", " + std::to_string(t.plan.size()) + " shards, " + std::to_string(policy.replicas) +
          " reducers each";
  return t;
}

}  // namespace es::sync
