// Node: closing the round we gather on the set the swarm already merged it with (docs/ARCHITECTURE.md,
// "Agreement"). A peer that lags the others by part of a round (back from a partition, a slow
// link) would otherwise gather to its own deadline, merge another set than theirs — its own late
// contribution, which they closed without — and repair afterwards: on the netlab a cut peer
// gathered round 8 for two minutes after the others had merged it, and missed round 9 as well.
// When a decided majority's records name the state and the set they merged the round into, and
// we hold every contribution of that set on the same base, merging that set now lands on their
// bytes: we are in step at once and our next contribution goes out with theirs.
#include "core/node/node.h"
#include "core/node/node_util.h"
#include "core/node/rules/merged_set.h"

namespace es::node {

// The state a decided majority merged `round` into (by standing, as swarmStateOf decides; those
// still gathering it, us included, count against it), or nothing yet. A member whose record names
// another state for the round before disagrees with our base: the agreement check handles that.
std::optional<Node::StateGroup> Node::mergedByMajority(qint64 round) const {
  std::map<std::string, std::set<PeerId>> groups;  // fingerprint → peers
  std::set<PeerId> reporting, gathering{swarm_.selfId()};
  const auto ownBase = fingerprints_.find(round - 1);
  for (const auto& p : swarm_.peers()) {
    const Announcement& a = p.announced;
    if (isBanned(p.id) || a.claims.empty()) continue;
    if (auto m = a.merged.find(round); m != a.merged.end()) {
      const auto base = a.merged.find(round - 1);
      if (base != a.merged.end() && (ownBase == fingerprints_.end() || base->second != ownBase->second)) continue;
      groups[m->second].insert(p.id);
      reporting.insert(p.id);
    } else if (a.round == round) {
      gathering.insert(p.id);
    }
  }
  if (groups.empty()) return std::nullopt;
  auto largest = groups.begin();
  for (auto it = groups.begin(); it != groups.end(); ++it)
    if (totalWeight(standing_, it->second) > totalWeight(standing_, largest->second)) largest = it;
  std::set<PeerId> all = reporting;
  all.insert(gathering.begin(), gathering.end());
  if (2 * totalWeight(standing_, largest->second) <= totalWeight(standing_, all)) return std::nullopt;
  return StateGroup{largest->first, largest->second, 0};
}

// gather(): true if the round was closed here, on the majority's set.
bool Node::closeOnSwarmSet() {
  if (!gather_ || gather_->closing || resyncWanted_ || repair_) return false;
  const qint64 r = gather_->round;
  const auto group = mergedByMajority(r);
  if (!group) return false;
  const std::string digest = majoritySetDigest(r, group->members);
  if (digest.empty()) return false;
  std::set<ContentId> held;  // the contributions here
  if (auto own = contrib_.find(r); own != contrib_.end()) held.insert(own->second);
  for (const auto& [key, claims] : gather_->fetching)
    if (gather_->arrived.count(key.first)) held.insert(key.second);
  const auto set = findMergedSet(held, digest);
  if (!set) return false;
  Q_EMIT message(
      QStringLiteral("Round %1: %2 peers merged it with %3 contributions, all here; closing it with their set")
          .arg(r)
          .arg(group->members.size())
          .arg(set->size()));
  closeRound(false, &*set);
  return true;
}

}  // namespace es::node
