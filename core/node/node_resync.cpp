// Catching up with the swarm from a merged-state snapshot: newcomers, and peers that merged a
// different set of contributions than the majority.
#include "core/node/node.h"
#include "core/node/node_util.h"

#include <QDir>

#include <map>
#include <set>

namespace es::node {

using detail::q;

// The newest snapshot that at least two peers announce with the same content id (one, if only
// one peer announces snapshots at all): a single peer cannot feed us a state of its own making.
void Node::tryResync() {
  if (!pendingSnapshot_.empty()) return;
  std::map<std::pair<qint64, std::string>, int> votes;
  std::set<std::string> announcers;
  for (const auto& p : swarm_.peers()) {
    if (banned_.count(p.id)) continue;
    for (const auto& [round, id] : p.snapshot) {
      ++votes[{round, id}];
      announcers.insert(p.id);
    }
  }
  const int needed = announcers.size() >= 2 ? 2 : 1;
  auto chosen = votes.rend();
  for (auto it = votes.rbegin(); it != votes.rend() && chosen == votes.rend(); ++it)
    if (it->second >= needed && it->first.first > mergedRound_) chosen = it;
  if (chosen == votes.rend()) {
    // Nobody agrees (every peer merged alone, e.g. after a stall): converge on the newest
    // snapshot of the peer with the smallest id; that peer itself keeps its state.
    std::string lowest;
    for (const auto& p : swarm_.peers())
      if (!banned_.count(p.id) && !p.snapshot.empty() && p.snapshot.rbegin()->first > mergedRound_ && (lowest.empty() || p.id < lowest))
        lowest = p.id;
    if (!lowest.empty() && lowest < swarm_.selfId())
      for (const auto& p : swarm_.peers())
        if (p.id == lowest)
          for (auto it = votes.rbegin(); it != votes.rend() && chosen == votes.rend(); ++it)
            if (it->first.first == p.snapshot.rbegin()->first && it->first.second == p.snapshot.rbegin()->second) chosen = it;
    if (chosen == votes.rend() && !lowest.empty() && lowest > swarm_.selfId()) {
      resyncWanted_ = false;  // we are the reference the others converge on
      Q_EMIT message(QStringLiteral("Peers disagree and no snapshot is shared; keeping our state as the reference"));
      return;
    }
  }
  for (auto it = chosen; it != votes.rend(); it = votes.rend()) {
    pendingSnapshot_ = it->first.second;
    Q_EMIT message(QStringLiteral("Fetching the swarm's snapshot of round %1 (%2 peers announce it)").arg(it->first.first).arg(it->second));
    if (auto s = swarm_.fetch(pendingSnapshot_, QDir(config_.fetchDir).filePath("snapshots").toStdString()); !s) {
      Q_EMIT message(QStringLiteral("Cannot fetch the snapshot: %1").arg(q(s.error())));
      pendingSnapshot_.clear();
    }
    return;
  }
}

void Node::onSnapshotAdopted(qint64 round, const QString& error) {
  pendingSnapshot_.clear();
  if (!error.isEmpty()) {
    Q_EMIT message(QStringLiteral("Snapshot refused: %1").arg(error));
    return;
  }
  resyncWanted_ = false;
  mergedRound_ = round;
  round_ = round + 1;
  gather_.reset();
  deadline_.stop();
  Q_EMIT message(QStringLiteral("Took the swarm's snapshot of round %1; training round %2").arg(round).arg(round_));
  announce();
}


}  // namespace es::node
