// Which experts this peer trains: the first claim at join, and the drift toward an even split
// between rounds (orphans taken, replicas shed).
#include "core/node/node.h"
#include "core/node/node_util.h"
#include "core/node/rules/peer_rules.h"

#include <algorithm>
#include <set>

namespace es::node {

ExpertBudget expertBudget(std::int64_t totalParameters, std::int64_t expertParametersAllLayers, int nExperts,
                          std::int64_t availableBytes) {
  ExpertBudget b;
  const std::int64_t shared = totalParameters - expertParametersAllLayers * nExperts;
  b.fixedBytes = totalParameters * 4 * 4 + shared * 4 * 3;
  b.perExpertBytes = expertParametersAllLayers * 4 * 3;
  const std::int64_t room = availableBytes - b.fixedBytes;
  b.experts =
      room <= 0
          ? 0
          : static_cast<int>(std::min<std::int64_t>(nExperts, room / std::max<std::int64_t>(1, b.perExpertBytes)));
  return b;
}

int Node::capped(int count) const {
  return config_.maxExperts > 0 ? std::max(1, std::min(count, config_.maxExperts)) : count;
}

using detail::expertList;
using detail::joinInts;

// Experts to train. In a running swarm (someone has merged a round): the least-owned ones
// (p2p/leases.h), leases judged at the swarm's round (swarmRound), banned and silent peers owning
// nothing. At a fresh start, every starter — claimed already or not — computes the same split
// from the same list of ids in round 1's order (roundRank, not the smallest id first: ids are
// cheap to grind), so simultaneous starters neither collide nor leave an expert out, whoever of
// them announced first.
void Node::decideClaims() {
  const int e = config_.nExperts;
  const auto peers = swarm_.peers();
  std::vector<PeerId> fresh{swarm_.selfId()};
  bool running = false;
  for (const auto& p : peers) {
    if (p.announced.round > 1 || !p.announced.contrib.empty())
      running = true;
    else
      fresh.push_back(p.id);
  }
  if (running) {
    // Joining a running swarm: at least our share of the experts, the least-owned first.
    const int share = (e + static_cast<int>(peers.size())) / (static_cast<int>(peers.size()) + 1);
    ClaimRequest request{
        swarmRound(peers), e, capped(std::max(config_.policy.expertsPerPeer, share)), config_.policy.leaseRounds, {}};
    std::set<PeerId> live;
    for (const auto& p : peers_.livePeers(request.round)) live.insert(p.id);
    for (const auto& p : peers)
      if (!live.count(p.id)) request.excluded.insert(p.id);  // banned, silent (or owning nothing anyway)
    own_.claims = swarm_.chooseClaims(request);
    // The swarm has merged rounds already: start from its newest snapshot, not from the seed.
    if (std::any_of(peers.begin(), peers.end(), [](const SwarmPeer& p) { return p.announced.round > 1; }))
      agreement_.wantResync(false);
  } else {
    std::sort(fresh.begin(), fresh.end(), [](const PeerId& a, const PeerId& b) { return ranksBefore(1, a, b); });
    const int n = static_cast<int>(fresh.size());
    const int index = static_cast<int>(std::find(fresh.begin(), fresh.end(), swarm_.selfId()) - fresh.begin());
    const int k = capped(std::min(e, std::max(config_.policy.expertsPerPeer, (e + n - 1) / n)));
    for (int j = 0; j < k; ++j) own_.claims.push_back((index * k + j) % e);
    std::sort(own_.claims.begin(), own_.claims.end());
    own_.claims.erase(std::unique(own_.claims.begin(), own_.claims.end()), own_.claims.end());
  }
  if (peers.empty()) {
    // Links without records are a fault to debug by (a link gossips every record it holds at once).
    const int links = swarm_.connections();
    Q_EMIT message(
        QStringLiteral("No other peers found: training alone, all experts of this peer's claim%1")
            .arg(links > 0 ? QStringLiteral(" (%1 run links, no record through them)").arg(links) : QString()));
  }
  Q_EMIT message(
      QStringLiteral("Claimed experts %1 (%2 other peers seen)").arg(joinInts(own_.claims)).arg(peers.size()));
  Q_EMIT noted(QStringLiteral("claims"), {{"experts", expertList(own_.claims)}, {"change", false}});

  announce();  // claimed now: others count us as live while our trainer starts
  startTrainer();
  if (agreement_.outOfStep()) agreement_.tryResync();
}

// Between rounds, claims drift toward an even split without a coordinator (planClaims,
// peer_rules.h). The new claims reach the trainer together with the merge, so the next
// contribution and the record that announces it always agree (a contribution that carries an
// expert its record does not claim is rejected, and its sender banned).
std::vector<int> Node::plannedClaims(qint64 nextRound) const {
  if (stopping_ || own_.claims.empty()) return own_.claims;
  return planClaims({swarm_.selfId(), own_.claims, peers_.livePeers(nextRound), nextRound, config_.nExperts,
                     config_.policy.expertsPerPeer, config_.maxExperts,
                     [this](const PeerId& owner) { return peers_.hasMergedWork(owner); }});
}

}  // namespace es::node
