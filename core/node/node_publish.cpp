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

using detail::median;
using detail::q;

void Node::publishContribution(const RoundTrained& trained) {
  const QPointer<Node> self(this);  // the callback may come after we are gone
  swarm_.publish(trained.contribution.path, [self, trained, epoch = baseEpoch_](Expected<ContentId> id) {
    if (self) self->onContributionPublished(trained, epoch, std::move(id));
  });
}

void Node::onContributionPublished(const RoundTrained& trained, std::uint64_t epoch, Expected<ContentId> id) {
  if (!id) return Q_EMIT failed(QStringLiteral("publishing round %1: %2").arg(trained.round).arg(q(id.error())));
  if (stopping_) return;
  const bool ours = std::any_of(contrib_.begin(), contrib_.end(), [&](const auto& c) { return c.second == *id; });
  if (epoch != baseEpoch_) {
    // Built on a state we left while it was hashed: never announced. The trainer sends the round
    // again on the repaired state, or trains the next one from the snapshot.
    Q_EMIT message(QStringLiteral("Dropped our round %1 contribution: the state under it changed while it was hashed")
                       .arg(trained.round));
    if (!ours) swarm_.retire(*id, true);  // its file too: the trainer writes every contribution anew
    return;
  }
  if (resyncWanted_) {  // out of step since: hold it, as onRoundTrained does (published again if we give up)
    held_ = trained;
    if (!ours) swarm_.retire(*id, false);
    return;
  }
  startGathering(trained, *id);
}

void Node::startGathering(const RoundTrained& trained, const ContentId& id) {
  // A round trained again after a resync replaces the contribution built on the old base.
  if (auto old = contrib_.find(trained.round); old != contrib_.end() && old->second != id)
    swarm_.retire(old->second, true);
  contrib_[trained.round] = id;
  round_ = trained.round;
  announce();
  gather_.emplace();
  gather_->round = trained.round;
  gather_->own = trained;
  gather_->arrived[swarm_.selfId()] = {swarm_.selfId(), trained.contribution.path,
                                       std::set<int>(claims_.begin(), claims_.end())};
  gather_->clock.start();
  // Adaptive deadline: a multiple of the recent round time (not of the gather time — peers that
  // train slower than us are not late yet), within the run's bounds. Before any history, our
  // own training time for this round stands in (it reflects the machine's load).
  const double typical = std::max(median(roundSeconds_), trained.seconds);
  const double seconds = std::clamp(config_.policy.deadlineFactor * typical, config_.policy.deadlineMinSeconds,
                                    config_.policy.deadlineMaxSeconds);
  deadline_.start(static_cast<int>(seconds * 1000));
  gather();
}

void Node::publishSnapshot(qint64 round, const QString& path) {
  const QPointer<Node> self(this);
  swarm_.publish(path.toStdString(), [self, round](Expected<ContentId> id) {
    if (self) self->onSnapshotPublished(round, std::move(id));
  });
}

void Node::onSnapshotPublished(qint64 round, Expected<ContentId> id) {
  if (!id)
    return Q_EMIT message(QStringLiteral("Cannot publish the snapshot of round %1: %2").arg(round).arg(q(id.error())));
  snapshots_[round] = *id;
  while (snapshots_.size() > 2) {
    swarm_.retire(snapshots_.begin()->second, true);
    snapshots_.erase(snapshots_.begin());
  }
  announce();
}

}  // namespace es::node
