// Catching up with the swarm from a merged-state snapshot: newcomers, and peers that merged a
// different set of contributions than the majority.
#include "core/node/node.h"
#include "core/node/node_util.h"

#include <QDir>

#include <map>
#include <optional>
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
  std::optional<std::pair<qint64, std::string>> chosen;
  // A snapshot of the round we merged counts: being out of step means our state of that round is
  // not the swarm's (the netlab's partition: the odd peer out merged round 4 with 5 of 6, the
  // others' round-4 snapshot was there, and `>` ignored it).
  for (auto it = votes.rbegin(); it != votes.rend() && !chosen; ++it)
    if (it->second >= needed && it->first.first >= mergedRound_) chosen = it->first;
  if (!chosen && majorityElsewhere_ && !announcers.empty()) {
    if (!waitingForMajority_)
      Q_EMIT message(QStringLiteral("Out of step with the majority: waiting for its next snapshot"));
    waitingForMajority_ = true;
    return;  // peersChanged calls us again when their records announce it
  }
  if (!chosen) chosen = convergeOnLowestId();
  if (!chosen) return;
  waitingForMajority_ = false;
  pendingSnapshot_ = chosen->second;
  Q_EMIT message(QStringLiteral("Fetching the swarm's snapshot of round %1 (%2 peers announce it)").arg(chosen->first).arg(votes[*chosen]));
  if (auto s = swarm_.fetch(pendingSnapshot_, QDir(config_.fetchDir).filePath("snapshots").toStdString()); !s) {
    Q_EMIT message(QStringLiteral("Cannot fetch the snapshot: %1").arg(q(s.error())));
    pendingSnapshot_.clear();
  }
}

// Nobody agrees (every peer merged alone, e.g. after a stall or a fresh start in which nobody saw
// anybody): converge on the peer with the smallest id among us and those that announce a
// snapshot of the round we merged or later (theirs is another state of the same round). That
// peer keeps its state; the others take its newest snapshot, or wait for it. Without the
// same-round snapshots, peers that all diverged in one round waited for each other forever.
// Returns the (round, content id) to fetch, or nothing.
std::optional<std::pair<qint64, std::string>> Node::convergeOnLowestId() {
  const SwarmPeer* lowest = nullptr;
  const auto peers = swarm_.peers();
  for (const auto& p : peers)
    if (!banned_.count(p.id) && !p.snapshot.empty() && p.snapshot.rbegin()->first >= mergedRound_ &&
        (!lowest || p.id < lowest->id))
      lowest = &p;
  if (!lowest || lowest->id > swarm_.selfId()) {
    resyncWanted_ = false;  // we are the reference the others converge on
    Q_EMIT message(QStringLiteral("Peers disagree and no snapshot is shared; keeping our state as the reference"));
    return std::nullopt;
  }
  return *lowest->snapshot.rbegin();
}

void Node::onSnapshotAdopted(qint64 round, const QString& error) {
  pendingSnapshot_.clear();
  if (!error.isEmpty()) {
    Q_EMIT message(QStringLiteral("Snapshot refused: %1").arg(error));
    return;
  }
  resyncWanted_ = majorityElsewhere_ = waitingForMajority_ = false;
  mergedRound_ = round;
  round_ = round + 1;
  gather_.reset();
  deadline_.stop();
  Q_EMIT message(QStringLiteral("Took the swarm's snapshot of round %1; training round %2").arg(round).arg(round_));
  announce();
}


}  // namespace es::node
