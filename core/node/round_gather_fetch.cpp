// RoundGather: the round's transfers (issue 14: what a fetch may bring). Each fetch gets its own
// folder and the exact sizes its content may have (checked by the swarm layer on the metadata,
// before the first piece); at most kMaxConcurrentFetches run at once, none past the quota. Past the
// deadline a transfer is waited for only while its bytes arrive fast enough to land in time.
#include "core/node/node_util.h"
#include "core/node/round_gather.h"

#include <QHash>

#include <algorithm>

namespace es::node {

using detail::q;

namespace {
// Several announcers' folder rules for one content: the first that allows the folder says which
// files are fetched; the quota counts the most any of them would fetch.
FetchLimits anyFolderOf(std::vector<FetchLimits> folders) {
  FetchLimits any;
  for (const auto& f : folders) any.maxBytes = std::max(any.maxBytes, f.most());
  const auto allowing = [folders](const std::string& name, const FetchLimits::FolderFiles& files) {
    for (const auto& f : folders)
      if (f.folder(name, files).empty()) return &f - folders.data();
    return std::ptrdiff_t(-1);
  };
  any.folder = [folders, allowing](const std::string& name, const FetchLimits::FolderFiles& files) {
    return allowing(name, files) >= 0 ? std::string() : folders.front().folder(name, files);
  };
  any.folderWanted = [folders, allowing](const FetchLimits::FolderFiles& files) {
    const auto k = allowing({}, files);
    return k >= 0 && folders[k].folderWanted ? folders[k].folderWanted(files) : std::set<std::string>{};
  };
  return any;
}
}  // namespace

// A fetch holds its slot for silentAfterMs(); one that brought bytes by then, twice that. The
// slots order the transfers (senders whose work we merged first); they reserve no bandwidth, so a
// transfer past its time goes on without one and the next starts beside it. Bytes alone earn no
// longer hold: eight fresh keys announced before the honest peers had trained, served at a trickle
// (the rest halving every 2 s, never done), held all 8 slots to every round's close, and the honest
// peers merged alone round after round (bench/sybil_nodes at 38dfc02; tst_node_sybils).
RoundGather::Slots RoundGather::slotsHeld() const {
  const qint64 now = clock_.elapsed(), silentMs = silentAfterMs();
  std::map<ContentId, std::int64_t> done;
  bool doneRead = false;
  Slots held;
  for (const auto& [id, t] : transfers_) {
    if (!t.inFlight || now - t.startedMs >= 2 * silentMs) continue;
    if (now - t.startedMs >= silentMs) {
      if (!doneRead) {
        for (const auto& traffic : swarm_.traffic().transfers) done[traffic.contentId] = traffic.doneBytes;
        doneRead = true;
      }
      if (done[id] == 0) continue;  // silent: its slot goes to the next
    }
    ++held.all;
    if (t.light) ++held.light;
  }
  return held;
}

// The swarm's traffic is read only when some transfer is old enough to be silent (it is asked on
// every pass of a round that waits, and reading it asks the session for every transfer's status).
std::set<PeerId> RoundGather::silentSenders() const {
  const qint64 now = clock_.elapsed();
  std::map<PeerId, ContentId> oldEnough;
  for (const auto& [sender, c] : contributions_) {
    const auto t = transfers_.find(c.content);
    if (t != transfers_.end() && t->second.inFlight && now - t->second.startedMs >= silentAfterMs())
      oldEnough.emplace(sender, c.content);
  }
  if (oldEnough.empty()) return {};
  std::map<ContentId, std::int64_t> done;
  for (const auto& traffic : swarm_.traffic().transfers) done[traffic.contentId] = traffic.doneBytes;
  std::set<PeerId> silent;
  for (const auto& [sender, content] : oldEnough)
    if (done[content] == 0) silent.insert(sender);
  return silent;
}

qint64 RoundGather::silentAfterMs() const {
  return std::min<qint64>(kSilentFetchMs, qint64(deadline_.minSeconds * 1000 / 3));
}

// The next moment a slot may free: a transfer's silentAfterMs() or twice that.
qint64 RoundGather::msUntilASlotFrees() const {
  const qint64 now = clock_.elapsed(), silentMs = silentAfterMs();
  qint64 soonest = -1;
  for (const auto& [id, t] : transfers_) {
    if (!t.inFlight) continue;
    for (const qint64 at : {t.startedMs + silentMs, t.startedMs + 2 * silentMs})
      if (at > now) {
        soonest = soonest < 0 ? at - now : std::min(soonest, at - now);
        break;
      }
  }
  return soonest;
}

int RoundGather::startFetches(std::vector<std::pair<PeerId, ContentId>> wanted,
                              const std::function<std::int64_t(const PeerId&)>& weightOf, bool heavyLive) {
  const auto tieOrder = [this](const PeerId& p) { return qHash(QString::fromStdString(p.str()), fetchOrderSecret_); };
  std::stable_sort(wanted.begin(), wanted.end(), [&](const auto& a, const auto& b) {
    const auto wa = weightOf(a.first), wb = weightOf(b.first);
    return wa != wb ? wa > wb : tieOrder(a.first) < tieOrder(b.first);
  });
  int waiting = 0;
  Slots slots = slotsHeld();
  for (const auto& [sender, content] : wanted)  // or later: at most K at once, within the quota
    if (!transfers_.count(content) && !startFetch(content, heavyLive && weightOf(sender) <= 1, slots)) ++waiting;
  return waiting;
}

std::int64_t RoundGather::bytesComing() const {
  std::int64_t coming = 0;
  for (const auto& [id, t] : transfers_)
    if (t.inFlight) coming += t.limits.most();
  return coming;
}

// The exact sizes the content may have: those of every sender that announced it this round (an
// impostor's claims must not make the real sender's file look wrong and get it banned). A sharded
// round's are folders (sharded_fetch.h): allowed if one announcer's rule allows it, and then its
// files are fetched.
FetchLimits RoundGather::limitsFor(const ContentId& id) const {
  FetchLimits all;
  std::vector<FetchLimits> folders;
  for (const auto& [sender, c] : contributions_) {
    if (c.content != id) continue;
    auto limits = sizesOf_(sender, c.claims);
    if (limits.folder) {
      folders.push_back(std::move(limits));
      continue;
    }
    all.sizes.insert(all.sizes.end(), limits.sizes.begin(), limits.sizes.end());
  }
  if (folders.size() == 1) return folders.front();
  if (!folders.empty()) return anyFolderOf(std::move(folders));
  std::sort(all.sizes.begin(), all.sizes.end());
  all.sizes.erase(std::unique(all.sizes.begin(), all.sizes.end()), all.sizes.end());
  return all;
}

bool RoundGather::startFetch(const ContentId& id, bool lightShare, Slots& slots) {
  if (!detail::isSafeId(id) || transfers_.count(id) || slots.all >= kMaxConcurrentFetches) return false;
  if (lightShare && slots.light >= kMaxConcurrentFetches / 2) return false;
  const auto limits = limitsFor(id);
  const auto senders = sendersOf(id);
  const QString who = senders.empty() ? QString() : q(*senders.begin()).left(16);
  if (!folder_.allows(limits.most(), bytesComing(),
                      QStringLiteral("the contribution of %1 to round %2").arg(who).arg(round()), round()))
    return false;
  const qint64 now = clock_.elapsed();
  Transfer& t = transfers_[id];
  t = {limits, true, lightShare, {}, 0, now, now};
  if (auto s = swarm_.fetch(id, folder_.contributionFolder(round(), id), limits); !s) {
    log_.say(QStringLiteral("Cannot fetch from %1: %2").arg(who, q(s.error())));
    t.inFlight = false;  // stays started: never tried again this round
    return true;
  }
  ++slots.all;
  if (lightShare) ++slots.light;
  return true;
}

// Drops the transfer and its partial file; the next pass starts it afresh — at most 3 times, then
// the content is given up for the round (its transfer stays: never started again).
bool RoundGather::failed(const ContentId& id) {
  const auto t = transfers_.find(id);
  if (t == transfers_.end()) return false;
  t->second.inFlight = false;
  swarm_.retire(id, true);
  if (folder_.failedAgain(id) > 3) return false;
  transfers_.erase(t);
  return true;
}

// Retry: someone announced it after its transfer began, with other sizes: not yet conclusive
// (that one may be the real sender, the first an impostor) — once more, with everyone's sizes.
// Guessed: checked against every announcer's predicted sizes, none matched — but the sizes were
// guessed from claims newer than the round (its record of the round never seen): the round goes
// on without them, and nobody is banned for our guess. Liars: none of its announcers told the
// truth. The bytes may still be an honest peer's that an impostor announced first with its own
// sizes: the announcers are forgotten and the transfer with them, so a live announcer of the same
// id starts it afresh with its sizes (each try bans its announcers: bounded by their number).
RoundGather::Refusal RoundGather::refused(const ContentId& id) {
  const auto t = transfers_.find(id);
  if (t == transfers_.end()) return {};
  t->second.inFlight = false;
  if (t->second.limits.sizes != limitsFor(id).sizes) {
    transfers_.erase(t);
    return {Refusal::Retry, {}};
  }
  Refusal out{Refusal::Liars, sendersOf(id)};
  for (const auto& sender : out.senders)
    if (contributions_.at(sender).claimsGuessed) out.kind = Refusal::Guessed;
  if (out.kind == Refusal::Guessed) {
    givenUp_.insert(out.senders.begin(), out.senders.end());
    return out;
  }
  for (const auto& sender : out.senders) contributions_.erase(sender);
  transfers_.erase(t);
  return out;
}

// Waiting on past the deadline is worth it only for a transfer that will finish in time: bytes
// came since the last look, and at that rate the rest lands before deadline.max_seconds. A
// contribution announced but never served (no bytes) or served at a trickle (an attacker holding
// the round to its maximum, one byte a look) is not waited for. A transfer younger than one
// re-arm (half the minimum) is given that look to begin: a late sender's contribution, announced
// just before the deadline, is still connecting (tst_swarm_newcomer: closing on it at once left
// the newcomer's contributions out of every round). Beyond that look, only the transfers of
// senders that `mayHold` hold the round: a fresh key sending just enough at every look (and never
// the last piece) held every round to the maximum (issue 37 item 5).
bool RoundGather::fetchesProgressing(const PeerTest& mayHold) {
  std::map<ContentId, std::pair<std::int64_t, std::int64_t>> done;  // content → (bytes done, total once known)
  for (const auto& t : swarm_.traffic().transfers) done[t.contentId] = {t.doneBytes, t.totalBytes};
  const qint64 nowMs = clock_.elapsed();
  const double leftSeconds = deadline_.maxSeconds - nowMs / 1000.0;
  const qint64 graceMs = static_cast<qint64>(deadline_.minSeconds * 1000 / 2);
  bool progressing = false;
  for (auto& [id, p] : transfers_) {
    if (!p.inFlight) continue;
    const std::int64_t most = p.limits.most();
    const auto [bytes, total] = done.count(id) ? done[id] : std::pair<std::int64_t, std::int64_t>{0, 0};
    const std::int64_t size = total > 0 ? std::min(total, most) : most;  // the metadata's size, once known
    const double seconds = std::max<qint64>(nowMs - p.atMs, 1) / 1000.0;
    const double rate = (bytes - p.bytes) / seconds;  // bytes per second since the last look
    const bool young = nowMs - p.startedMs < graceMs;
    if (young) progressing = true;
    if (!young && rate > 0 && (size - bytes) / rate <= leftSeconds)
      for (const auto& sender : sendersOf(id))
        if (mayHold(sender)) {
          progressing = true;
          heldBy_.insert(sender);
        }
    p.bytes = bytes;
    p.atMs = nowMs;
  }
  return progressing;
}

}  // namespace es::node
