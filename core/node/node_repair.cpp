// Node: repairing a split without a snapshot (docs/ARCHITECTURE.md, "Agreement"). A deadline
// closed our round with another set of contributions than the majority's (a partition, a slow
// link): we merged it into another state. The majority's records name the set they merged (a
// digest, merged_set.h); we find it among the round's contributions we know, fetch the ones we
// lack (a few MB each, not a whole snapshot), and merge the round again from the same base
// (SpesPeer::remerge), which lands on the majority's bytes. Whatever fails falls back to the
// snapshot (tryResync).
#include "core/node/node.h"
#include "core/node/node_util.h"
#include "core/node/rules/merged_set.h"

#include <QDir>

#include <algorithm>

namespace es::node {

using detail::isSafeId;
using detail::q;

// At merge time: what a repair of this round would need (the round's announced contributions,
// the files that arrived, ours) and the digest of the set we merged, for our record.
void Node::keepClosedRound(const MergeResult& result) {
  if (!gather_) return;
  ClosedRound closed{gather_->round, gather_->fetching, gather_->fetchedPath, gather_->own.contribution.baseHash};
  const auto own = contrib_.find(gather_->round);
  if (own != contrib_.end()) {
    closed.fetching[{swarm_.selfId(), own->second}] = gather_->arrived[swarm_.selfId()].claims;
    closed.fetchedPath[own->second] = gather_->own.contribution.path;
  }
  lastClosed_ = std::move(closed);
  std::set<ContentId> accepted;
  for (const auto& v : result.verdicts)
    if (auto id = contentOf_.find(v.sender); v.accepted && id != contentOf_.end()) accepted.insert(id->second);
  setDigests_[result.round] = mergedSetDigest(accepted);
  while (setDigests_.size() > 2) setDigests_.erase(setDigests_.begin());
}

// The set the majority says it merged: the digest most of its members report for the round.
std::string Node::majoritySetDigest(qint64 round, const std::set<PeerId>& members) const {
  std::map<std::string, int> votes;
  for (const auto& p : swarm_.peers())
    if (auto s = p.announced.sets.find(round);
        members.count(p.id) && p.id != swarm_.selfId() && s != p.announced.sets.end())
      ++votes[s->second];
  std::string best;
  for (const auto& [digest, n] : votes)
    if (best.empty() || n > votes[best]) best = digest;
  return best;
}

// Every (sender, content id) of the round we know of: announced before we closed, or named by a
// record since (a contribution that reached the majority and not us).
std::map<std::pair<PeerId, ContentId>, std::set<int>> Node::knownContributions(qint64 round) const {
  auto known = lastClosed_->fetching;
  for (const auto& p : swarm_.peers()) {
    const auto c = p.announced.contrib.find(round);
    if (isBanned(p.id) || c == p.announced.contrib.end() || !isSafeId(c->second) || known.count({p.id, c->second}))
      continue;
    const auto held = roundClaims_.of(p.id, round);
    known[{p.id, c->second}] = held ? *held : std::set<int>(p.announced.claims.begin(), p.announced.claims.end());
  }
  return known;
}

// Out of step in `round` (checkAgreement): true if a repair started (or is running) instead of
// a snapshot fetch.
bool Node::startRepair(qint64 round, const StateGroup& group) {
  if (repair_) return true;
  // Only the round merged last, and not while the next one's merge is queued (it lands first and
  // the trainer's state is then a round past the one to repair: the netlab's cut peer waited 30 s
  // for such a repair in vain).
  if (!lastClosed_ || lastClosed_->round != round || round != mergedRound_ || !worker_ || repairTried_ >= round ||
      (gather_ && gather_->closing))
    return false;
  repairTried_ = round;
  const std::string digest = majoritySetDigest(round, group.members);
  if (digest.empty()) return false;
  const auto known = knownContributions(round);
  std::set<ContentId> ids;
  for (const auto& [key, claims] : known) ids.insert(key.second);
  const auto set = findMergedSet(ids, digest);
  if (!set) {
    Q_EMIT message(QStringLiteral("The majority merged round %1 from a set of contributions we do not know (%2 known)")
                       .arg(round)
                       .arg(ids.size()));
    return false;
  }
  Repair repair{round, group.fingerprint, digest, {}, {}, false, 0};
  for (const auto& [key, claims] : known) {
    if (!set->count(key.second)) continue;
    if (auto path = lastClosed_->fetchedPath.find(key.second); path != lastClosed_->fetchedPath.end())
      repair.have.push_back({key.first, path->second, claims});
    else
      repair.missing[key.second].push_back({key.first, {}, claims});
  }
  for (auto it = repair.missing.begin(); it != repair.missing.end(); ++it) {
    if (startRepairFetch(round, it->first, it->second)) continue;
    for (auto started = repair.missing.begin(); started != it; ++started) swarm_.retire(started->first, true);
    return false;
  }
  Q_EMIT message(QStringLiteral("Out of step in round %1: merging the majority's %2 contributions again (%3 to fetch) "
                                "instead of taking a snapshot")
                     .arg(round)
                     .arg(set->size())
                     .arg(repair.missing.size()));
  repair_ = std::move(repair);
  if (repair_->missing.empty()) runRepair();
  return true;
}

bool Node::startRepairFetch(qint64 round, const ContentId& id, const std::vector<IncomingContribution>& senders) {
  FetchLimits limits;
  for (const auto& s : senders) {
    const auto one = contributionLimits(s.sender, s.claims, round, lastClosed_->ownBaseHash);
    limits.sizes.insert(limits.sizes.end(), one.sizes.begin(), one.sizes.end());
  }
  std::sort(limits.sizes.begin(), limits.sizes.end());
  if (limits.sizes.empty() ||
      !quotaAllows(limits.sizes.back(), QStringLiteral("a contribution to round %1 (repair)").arg(round)))
    return false;
  fetched_[round].insert(id);
  const QString dir = QDir(config_.fetchDir).filePath(QString::number(round) + "/" + q(id));
  if (auto s = swarm_.fetch(id, dir.toStdString(), limits); !s) {
    Q_EMIT message(QStringLiteral("Cannot fetch %1 for the repair: %2").arg(q(id).left(16), q(s.error())));
    return false;
  }
  return true;
}

void Node::onRepairFetched(const ContentId& id, const std::string& path) {
  const auto it = repair_->missing.find(id);
  for (auto c : it->second) {
    c.path = path;
    repair_->have.push_back(std::move(c));
  }
  repair_->missing.erase(it);
  if (repair_->missing.empty() && !repair_->merging) runRepair();
}

void Node::runRepair() {
  repair_->merging = true;
  QMetaObject::invokeMethod(
      worker_,
      [w = worker_, r = repair_->round, list = repair_->have, f = q(repair_->fingerprint)] { w->remerge(r, list, f); },
      Qt::QueuedConnection);
}

// The watchdog's look (onResyncWatchdog): a repair whose fetches got no bytes since the last look
// gives way to the snapshot.
bool Node::repairStalled() {
  if (!repair_ || repair_->merging) return false;
  std::int64_t done = 0;
  for (const auto& t : swarm_.traffic().transfers)
    if (repair_->missing.count(t.contentId)) done += t.doneBytes;
  const bool stalled = done <= repair_->doneBytes;
  repair_->doneBytes = done;
  return stalled;
}

void Node::abandonRepair(const QString& why) {
  if (!repair_) return;
  Q_EMIT message(QStringLiteral("Cannot merge round %1 again with the majority's set: %2; taking its snapshot instead")
                     .arg(repair_->round)
                     .arg(why));
  for (const auto& [id, senders] : repair_->missing) swarm_.retire(id, true);
  repair_.reset();
  tryResync();
}

void Node::onRemerged(qint64 round, const QString& fingerprint, const QString& sharedFingerprint, int accepted,
                      const QString& error) {
  if (!repair_ || repair_->round != round) return;
  if (!error.isEmpty()) return abandonRepair(error);
  // The round's ledger row names the state the round ended in (its contribution rows keep what
  // we judged at the first merge); written once the repaired state is durable (onPersisted).
  const int count = static_cast<int>(repair_->have.size());
  repairedRows_[round] = {round, 0, count, count, accepted, sharedFingerprint.toStdString(), config_.peer.stateDir};
  Q_EMIT message(QStringLiteral("Repaired round %1: merged the majority's %2 contributions again, into its state %3")
                     .arg(round)
                     .arg(repair_->have.size())
                     .arg(fingerprint));
  setDigests_[round] = repair_->digest;
  if (lastSummary_ && lastSummary_->round == round) {  // what the round line said is not true any more
    RoundSummary s = *lastSummary_;
    s.repaired = true;
    s.peers = s.merge.accepted = accepted;
    s.merge.fingerprint = fingerprint.toStdString();
    s.merge.sharedFingerprint = sharedFingerprint.toStdString();
    s.valLoss.reset();  // measured on the state we left; not measured again
    s.merge.valLoss.reset();
    Q_EMIT roundRepaired(s);
  }
  repair_.reset();
  // The round we held (or are hashing) was built on the state we left: the trainer sends it
  // again, on this one.
  held_.reset();
  ++baseEpoch_;
  forgetContributionsAfter(round);
  endResync();
  noteFingerprint(round, fingerprint.toStdString());
  announce();
}

}  // namespace es::node
