// Publishing what this peer made — its round's contribution and its snapshots. The swarm hashes
// each file off the engine thread and calls back here (Swarm::publish): hashing a snapshot takes
// seconds, and meanwhile the engine thread keeps pumping alerts, gossip and timers. The node's
// state may move on while a contribution is hashed (a snapshot adopted, a round repaired): the
// trainer's base epoch says whether it is still built on the state we hold.
#include "core/node/node.h"
#include "core/node/node_util.h"

#include <QPointer>

#include <algorithm>

namespace es::node {

using detail::q;

void Node::announce() {
  if (auto s = swarm_.announce(own_.announcement(stopping_, config_.policy.leaseRounds)); !s)
    Q_EMIT message(QStringLiteral("Announce failed: %1").arg(q(s.error())));
}

void Node::publishContribution(const RoundTrained& trained) {
  const QPointer<Node> self(this);  // the callback may come after we are gone
  swarm_.publish(trained.contribution.path, [self, trained, epoch = baseEpoch_](Expected<ContentId> id) {
    if (self) self->onContributionPublished(trained, epoch, std::move(id));
  });
}

void Node::onContributionPublished(const RoundTrained& trained, std::uint64_t epoch, Expected<ContentId> id) {
  if (!id) return Q_EMIT failed(QStringLiteral("publishing round %1: %2").arg(trained.round).arg(q(id.error())));
  if (stopping_) return;
  const bool ours =
      std::any_of(own_.contrib.begin(), own_.contrib.end(), [&](const auto& c) { return c.second == *id; });
  if (epoch != baseEpoch_) {
    // Built on a state we left while it was hashed: never announced. The trainer sends the round
    // again on the repaired state, or trains the next one from the snapshot.
    Q_EMIT message(QStringLiteral("Dropped our round %1 contribution: the state under it changed while it was hashed")
                       .arg(trained.round));
    Q_EMIT noted(QStringLiteral("contributionDropped"), {{"round", trained.round}});
    if (!ours) swarm_.retire(*id, true);  // its file too: the trainer writes every contribution anew
    return;
  }
  if (agreement_.outOfStep()) {  // out of step since: hold it, as onRoundTrained does (published again if we give up)
    held_ = trained;
    if (!ours) swarm_.retire(*id, false);
    return;
  }
  startGathering(trained, *id);
}

void Node::startGathering(const RoundTrained& trained, const ContentId& id) {
  // A round trained again after a resync replaces the contribution built on the old base.
  if (auto old = own_.contrib.find(trained.round); old != own_.contrib.end() && old->second != id)
    swarm_.retire(old->second, true);
  own_.contrib[trained.round] = id;
  own_.round = trained.round;
  announce();
  const bool sharded = trained.topology && trained.topology->sharded;
  const auto audits = sharded ? drawAuditShards(trained) : std::vector<std::string>{};
  auto sizesOf = [this, trained, audits](const PeerId& sender, const std::set<int>& claims) {
    if (trained.topology && trained.topology->sharded) return shardedContributionSizes(trained, sender, claims, audits);
    return contributionSizes(sender, claims, trained.round, trained.contribution.baseHash);
  };
  gather_.emplace(swarm_, folder_, log_, trained, swarm_.selfId(), std::move(sizesOf),
                  RoundGather::Deadline{config_.policy.deadlineMinSeconds, config_.policy.deadlineMaxSeconds,
                                        roundTimes_.freshDeadlineSeconds(config_.policy, trained.seconds)});
  gather_->arrive({swarm_.selfId(), trained.contribution.path, std::set<int>(own_.claims.begin(), own_.claims.end())});
  deadline_.start(static_cast<int>(roundTimes_.deadlineSeconds(config_.policy, trained.seconds) * 1000));
  gather();
}

void Node::publishSnapshot(qint64 round, const QString& path) {
  const QPointer<Node> self(this);
  swarm_.publish(path.toStdString(), [self, round, path](Expected<ContentId> id) {
    if (self) self->onSnapshotPublished(round, path, std::move(id));
  });
}

void Node::onSnapshotPublished(qint64 round, const QString& path, Expected<ContentId> id) {
  if (!id)
    return Q_EMIT message(QStringLiteral("Cannot publish the snapshot of round %1: %2").arg(round).arg(q(id.error())));
  own_.snapshots[round] = *id;
  own_.snapshotFiles[*id] = path.toStdString();
  while (own_.snapshots.size() > 2) {
    const ContentId old = own_.snapshots.begin()->second;
    own_.snapshots.erase(own_.snapshots.begin());
    if (std::any_of(own_.snapshots.begin(), own_.snapshots.end(), [&old](const auto& s) { return s.second == old; }))
      continue;  // the same bytes published for a later round too: still ours
    swarm_.retire(old, true);
    own_.snapshotFiles.erase(old);
  }
  announce();
}

}  // namespace es::node
