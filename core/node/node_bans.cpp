// The node's bans and standing: bans are made when a contribution is rejected, standing grows
// when one is accepted; both are kept in the ledger and reloaded at start (core/node/rules/bans.h and
// core/node/rules/standing.h have the rules).
#include "core/node/node.h"
#include "core/node/node_util.h"

#include <QDateTime>

namespace es::node {

using detail::q;

void Node::loadBans() {
  anchorStanding(standing_, config_.policy.anchors);
  if (!ledger_) return;
  auto bans = es::node::loadBans(ledger_->path(), swarm_.runId(), QDateTime::currentMSecsSinceEpoch());
  if (!bans) return Q_EMIT message(QStringLiteral("Cannot load the run's bans: %1").arg(q(bans.error())));
  banned_.insert(bans->begin(), bans->end());
  if (!bans->empty()) Q_EMIT message(QStringLiteral("Loaded %1 bans of this run from the ledger").arg(bans->size()));
  auto standing = es::node::loadStanding(ledger_->path(), swarm_.runId());
  if (!standing) return Q_EMIT message(QStringLiteral("Cannot load the peers' standing: %1").arg(q(standing.error())));
  standing_ = std::move(*standing);
  anchorStanding(standing_, config_.policy.anchors);
}

// Counted at merge time (the ledger's rows follow once the round is durable); a crash between
// the two loses at most that round's increments, as it loses the round.
void Node::noteStanding(qint64 round, const MergeResult& result) {
  standingAt_[round] = standing_;
  while (standingAt_.size() > 3) standingAt_.erase(standingAt_.begin());
  for (const auto& v : result.verdicts)
    if (v.accepted) ++standing_[v.sender];
}

// A vote on the state `round` was merged into weighs each voter by the work we merged *before*
// that round (swarmStateOf). Counting the round itself tilts a split in it: in a split three ways
// each peer had merged one partner's contribution in the round, so its own state and that
// partner's outweighed the third and each peer picked another winner (tst_node_rounds
// aSplitThreeWaysComesBackToOneState). Peers that worked together until the split weigh the
// voters alike, so they pick alike. (A round we did not merge — a snapshot's — has no entry: the
// standing of now.)
const Standing& Node::standingBefore(qint64 round) const {
  const auto it = standingAt_.find(round);
  return it == standingAt_.end() ? standing_ : it->second;
}

void Node::ban(const PeerId& id, const std::string& reason) {
  banned_[id] = {QDateTime::currentMSecsSinceEpoch(), reason};
  if (ledger_) ledger_->banPeer(swarm_.runId(), id.str(), reason);
  Q_EMIT noted(QStringLiteral("ban"), {{"peer", q(id)}, {"reason", QString::fromStdString(reason)}});
}

bool Node::isBanned(const PeerId& id) const {
  auto it = banned_.find(id);
  return it != banned_.end() && banInForce(it->second, QDateTime::currentMSecsSinceEpoch());
}

}  // namespace es::node
