// Agreement: repairing a split without a snapshot (docs/ARCHITECTURE.md, "Agreement"). A deadline
// closed our round with another set of contributions than the majority's (a partition, a slow
// link): we merged it into another state. The majority's records name the set they merged (a
// digest, merged_set.h); we find it among the round's contributions we know, fetch the ones we
// lack (a few MB each, not a whole snapshot), and merge the round again from the same base
// (SpesPeer::remerge), which lands on the majority's bytes. Whatever fails falls back to the
// snapshot (tryResync).
#include "core/node/agreement.h"

#include "core/node/node_util.h"
#include "core/node/rules/merged_set.h"

#include <algorithm>

namespace es::node {

using detail::isSafeId;
using detail::q;

namespace {

using Known = std::map<std::pair<PeerId, ContentId>, std::set<int>>;  // (sender, content) → its claims

// Every (sender, content id) of the round we know of: announced before we closed, or named by a
// record since (a contribution that reached the majority and not us).
Known knownContributions(const RoundGather& closed, const Swarm& swarm, const PeerBook& peers) {
  Known known;
  for (const auto& [sender, c] : closed.contributions()) known[{sender, c.content}] = c.claims;
  for (const auto& p : swarm.peers()) {
    const auto c = p.announced.contrib.find(closed.round());
    if (peers.isBanned(p.id) || c == p.announced.contrib.end() || !isSafeId(c->second) ||
        known.count({p.id, c->second}))
      continue;
    const auto held = peers.claimsIn(p.id, closed.round());
    known[{p.id, c->second}] = held ? *held : std::set<int>(p.announced.claims.begin(), p.announced.claims.end());
  }
  return known;
}

}  // namespace

// Out of step in `round` (checkAgreement): true if a repair started (or is running) instead of
// a snapshot fetch. Only the round merged last, and not while the next one's merge is queued (it
// lands first and the trainer's state is then a round past the one to repair: the netlab's cut
// peer waited 30 s for such a repair in vain).
bool Agreement::startRepair(std::int64_t round, const StateGroup& group) {
  if (repair_) return true;
  if (!lastClosed_ || lastClosed_->round() != round || round != own_.mergedRound || !host_.trainerRunning() ||
      repairTried_ >= round || host_.mergeQueued())
    return false;
  // A sharded round's contributions are folders of which we hold only our shards' files, and
  // SpesPeer::remerge reads whole files: the snapshot it is (issue 38).
  if (const auto& topology = lastClosed_->own().topology; topology && topology->sharded) return false;
  repairTried_ = round;
  const std::string digest = majoritySetDigest(round, group.members);
  if (digest.empty()) return false;
  const auto known = knownContributions(*lastClosed_, swarm_, peers_);
  std::set<ContentId> ids;
  for (const auto& [key, claims] : known) ids.insert(key.second);
  const auto set = findMergedSet(ids, digest);
  if (!set) {
    log_.say(QStringLiteral("The majority merged round %1 from a set of contributions we do not know (%2 known)")
                 .arg(round)
                 .arg(ids.size()));
    return false;
  }
  Repair repair{round, group.fingerprint, digest, {}, {}, false, 0};
  for (const auto& [key, claims] : known) {
    if (!set->count(key.second)) continue;
    if (auto path = lastClosed_->pathOf(key.second))
      repair.have.push_back({key.first, *path, claims});
    else
      repair.missing[key.second].push_back({key.first, {}, claims});
  }
  for (auto it = repair.missing.begin(); it != repair.missing.end(); ++it) {
    if (startRepairFetch(round, it->first, it->second)) continue;
    for (auto started = repair.missing.begin(); started != it; ++started) swarm_.retire(started->first, true);
    return false;
  }
  log_.say(QStringLiteral("Out of step in round %1: merging the majority's %2 contributions again (%3 to fetch) "
                          "instead of taking a snapshot")
               .arg(round)
               .arg(set->size())
               .arg(repair.missing.size()));
  log_.note(QStringLiteral("repair"),
            {{"round", qint64(round)}, {"contributions", int(set->size())}, {"fetching", int(repair.missing.size())}});
  repair_ = std::move(repair);
  if (repair_->missing.empty()) runRepair();
  return true;
}

bool Agreement::startRepairFetch(std::int64_t round, const ContentId& id,
                                 const std::vector<IncomingContribution>& senders) {
  FetchLimits limits;
  for (const auto& s : senders) {
    const auto one = host_.contributionSizes(s.sender, s.claims, round, lastClosed_->own().contribution.baseHash);
    limits.sizes.insert(limits.sizes.end(), one.sizes.begin(), one.sizes.end());
  }
  std::sort(limits.sizes.begin(), limits.sizes.end());
  if (limits.sizes.empty() ||
      !folder_.allows(limits.sizes.back(), host_.bytesComing(),
                      QStringLiteral("a contribution to round %1 (repair)").arg(round), own_.round))
    return false;
  if (auto s = swarm_.fetch(id, folder_.contributionFolder(round, id), limits); !s) {
    log_.say(QStringLiteral("Cannot fetch %1 for the repair: %2").arg(q(id).left(16), q(s.error())));
    return false;
  }
  return true;
}

void Agreement::repairFetched(const ContentId& id, const std::string& path) {
  const auto it = repair_->missing.find(id);
  for (auto c : it->second) {
    c.path = path;
    repair_->have.push_back(std::move(c));
  }
  repair_->missing.erase(it);
  if (repair_->missing.empty() && !repair_->merging) runRepair();
}

void Agreement::runRepair() {
  repair_->merging = true;
  host_.remerge(repair_->round, repair_->have, repair_->fingerprint);
}

// The watchdog's look: a repair whose fetches got no bytes since the last look gives way to the
// snapshot.
bool Agreement::repairStalled() {
  if (!repair_ || repair_->merging) return false;
  std::int64_t done = 0;
  for (const auto& t : swarm_.traffic().transfers)
    if (repair_->missing.count(t.contentId)) done += t.doneBytes;
  const bool stalled = done <= repair_->doneBytes;
  repair_->doneBytes = done;
  return stalled;
}

void Agreement::abandonRepair(const QString& why) {
  if (!repair_) return;
  log_.say(QStringLiteral("Cannot merge round %1 again with the majority's set: %2; taking its snapshot instead")
               .arg(repair_->round)
               .arg(why));
  log_.note(QStringLiteral("repairAbandoned"), {{"round", qint64(repair_->round)}, {"reason", why}});
  for (const auto& [id, senders] : repair_->missing) swarm_.retire(id, true);
  repair_.reset();
  tryResync();
}

std::optional<Agreement::Repaired> Agreement::remerged(std::int64_t round, const QString& error) {
  if (!repair_ || repair_->round != round) return std::nullopt;
  if (!error.isEmpty()) {
    abandonRepair(error);
    return std::nullopt;
  }
  Repaired out{static_cast<int>(repair_->have.size()), repair_->digest};
  repair_.reset();
  endResync();
  return out;
}

}  // namespace es::node
