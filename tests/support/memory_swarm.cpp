#include "support/memory_swarm.h"

#include "core/common/lease_terms.h"
#include "support/memory_swarm_folders.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTimer>

#include <algorithm>

namespace es::node {
namespace {

void removePath(const std::string& path) {  // a file, or a folder with its files
  const QString p = QString::fromStdString(path);
  if (QFileInfo(p).isDir())
    QDir(p).removeRecursively();
  else
    QFile::remove(p);
}

}  // namespace

MemorySwarm::MemorySwarm(MemorySwarmHub& hub, std::string selfId) : hub_(hub), selfId_(PeerId(std::move(selfId))) {
  hub_.members_.push_back(this);
}

MemorySwarm::~MemorySwarm() {
  hub_.members_.erase(std::remove(hub_.members_.begin(), hub_.members_.end(), this), hub_.members_.end());
}

Status MemorySwarm::announce(const Announcement& a) {
  SwarmPeer p{selfId_, selfId_.str(), 0, a};
  const auto old = hub_.records_.find(selfId_);
  p.seq = (unsentRecord_ ? unsentRecord_->seq : old == hub_.records_.end() ? 0 : old->second.seq) + 1;
  if (cut_) {  // it waits for the link
    unsentRecord_ = std::move(p);
    return {};
  }
  hub_.records_[selfId_] = std::move(p);
  for (auto* member : hub_.members_)
    if (member != this && !member->cut_)
      QTimer::singleShot(0, &member->context_, [member] {
        if (member->events_.peersChanged) member->events_.peersChanged();
      });
  return {};
}

void MemorySwarm::setCut(bool cut) {
  if (cut == cut_) return;
  if (cut) seenWhenCut_ = peers();
  cut_ = cut;
  if (cut) return;
  if (unsentRecord_) {
    hub_.records_[selfId_] = std::move(*unsentRecord_);
    unsentRecord_.reset();
  }
  for (auto* member : hub_.members_) {
    QTimer::singleShot(0, &member->context_, [member] {
      member->deliverWithheld();
      if (member->events_.peersChanged) member->events_.peersChanged();
    });
  }
}

bool MemorySwarm::reachable(const ContentId& contentId) const {
  if (cut_) return false;
  const auto published = hub_.files_.find(contentId);
  if (published == hub_.files_.end()) return false;
  for (const auto& [publisher, path] : published->second) {
    const auto member = std::find_if(hub_.members_.begin(), hub_.members_.end(),
                                     [&](const MemorySwarm* m) { return m->selfId_ == publisher; });
    if (member == hub_.members_.end() || !(*member)->cut_) return true;  // a member gone: its file still serves
  }
  return false;
}

std::vector<SwarmPeer> MemorySwarm::peers() const {
  if (cut_) return seenWhenCut_;
  std::vector<SwarmPeer> out;
  for (const auto& [id, p] : hub_.records_)
    if (id != selfId_) out.push_back(p);
  return out;
}

void MemorySwarm::publish(const std::string& path, Published done) {
  QTimer::singleShot(publishDelayMs_, &context_, [this, path, done] {
    if (publishTampered_) publishTampered_(path);
    done(publish(path));
  });
}

// Content ids name the bytes, as info-hashes do: two peers publishing identical snapshots get one
// id (resync votes count peers per id).
Expected<ContentId> MemorySwarm::publish(const std::string& path) {
  if (QFileInfo(QString::fromStdString(path)).isDir()) {  // one content of many files
    auto id = memory_folders::folderId(QString::fromStdString(path));
    if (id) hub_.files_[*id][selfId_] = path;
    return id;
  }
  QFile file(QString::fromStdString(path));
  if (!file.open(QIODevice::ReadOnly)) return makeError("cannot read \"" + path + "\"");
  QCryptographicHash hash(QCryptographicHash::Sha256);
  if (!hash.addData(&file)) return makeError("cannot read \"" + path + "\"");
  const ContentId id(hash.result().toHex().toStdString());
  hub_.files_[id][selfId_] = path;  // any publisher's copy serves everyone
  return id;
}

// The limits are checked as the p2p layer checks a torrent's metadata: on the file's size, before
// it is handed over (a refused fetch never reports `fetched`).
Status MemorySwarm::fetch(const ContentId& contentId, const std::string& dir, const FetchLimits& limits) {
  const auto published = hub_.files_.find(contentId);
  if (published == hub_.files_.end() || published->second.empty())
    return makeError("unknown content " + contentId.str());
  const auto it = published->second.begin();
  limits_[contentId] = limits;
  if (failedHeld_.count(contentId)) return {};  // the session holds the failed transfer: no event again
  // As the p2p session: a fetch of content we publish ourselves reports nothing.
  if (silentOnOwn_ && published->second.count(selfId_)) return {};
  if (failing_ && failing_(contentId, dir)) {
    failedHeld_.insert(contentId);
    QTimer::singleShot(0, &context_, [this, contentId] {
      if (events_.fetchFailed) events_.fetchFailed(contentId, "v1 and v2 hashes do not describe the same data", false);
    });
    return {};
  }
  if ((withheld_ && withheld_(contentId)) || !reachable(contentId)) {
    withheldFetches_[contentId] = dir;
    return {};
  }
  if (QFileInfo(QString::fromStdString(it->second)).isDir()) return fetchFolder(contentId, it->second, dir, limits);
  const auto size = QFileInfo(QString::fromStdString(it->second)).size();
  const bool unpredicted =
      !limits.sizes.empty() && std::find(limits.sizes.begin(), limits.sizes.end(), size) == limits.sizes.end();
  if (unpredicted || (limits.maxBytes > 0 && size > limits.maxBytes)) {
    QTimer::singleShot(0, &context_, [this, contentId, size] {
      if (events_.fetchFailed)
        events_.fetchFailed(contentId, "one file of " + std::to_string(size) + " bytes, not the predicted size", true);
    });
    return {};
  }
  QTimer::singleShot(0, &context_, [this, contentId, path = it->second, dir] {
    std::string delivered = path;
    if (!dir.empty()) {  // as a transfer does: a copy of its own in the fetch's folder (it counts on this disk)
      const QString from = QString::fromStdString(path);
      const QString to = QDir(QString::fromStdString(dir)).filePath(QFileInfo(from).fileName());
      QDir().mkpath(QString::fromStdString(dir));
      QFile::remove(to);
      if (!QFile::copy(from, to)) {
        if (events_.fetchFailed) events_.fetchFailed(contentId, "cannot copy to " + to.toStdString(), false);
        return;
      }
      delivered = copies_[contentId] = to.toStdString();
      if (lost_ && lost_(contentId)) QFile::remove(to);
    }
    if (events_.fetched) events_.fetched(contentId, delivered);
  });
  return {};
}

// The folder's list goes to the limits when the "metadata" arrives (the next turn), then only
// the wanted files are copied, as a v2 transfer fetches files alone.
Status MemorySwarm::fetchFolder(const ContentId& contentId, const std::string& folder, const std::string& dir,
                                const FetchLimits& limits) {
  QTimer::singleShot(0, &context_, [this, contentId, folder, dir, limits] {
    const auto planned = memory_folders::plan(QString::fromStdString(folder), limits);
    if (!planned.refused.empty()) {
      if (events_.fetchFailed) events_.fetchFailed(contentId, planned.refused, true);
      return;
    }
    std::string delivered = folder;
    if (!dir.empty()) {
      auto copied = memory_folders::copyInto(QString::fromStdString(folder), dir, planned.wanted);
      if (!copied) {
        if (events_.fetchFailed) events_.fetchFailed(contentId, copied.error(), false);
        return;
      }
      delivered = copies_[contentId] = *copied;
      if (tampered_) tampered_(contentId, delivered);
    }
    if (events_.fetched) events_.fetched(contentId, delivered);
  });
  return {};
}

void MemorySwarm::deliverWithheld() {
  const auto waiting = withheldFetches_;
  for (const auto& [id, dir] : waiting) {
    if ((withheld_ && withheld_(id)) || !reachable(id)) continue;
    withheldFetches_.erase(id);
    (void)fetch(id, dir, limits_[id]);
  }
}

// As a transfer is removed: this member stops serving the content and, when asked, its file goes
// (a fetched copy, or what it published; other publishers of the same bytes keep serving theirs).
// What was retired is remembered.
void MemorySwarm::retire(const ContentId& contentId, bool deleteFile) {
  retired_.insert(contentId);
  withheldFetches_.erase(contentId);
  failedHeld_.erase(contentId);
  if (const auto copy = copies_.find(contentId); copy != copies_.end()) {
    if (deleteFile) removePath(copy->second);
    copies_.erase(copy);
  }
  const auto published = hub_.files_.find(contentId);
  if (published == hub_.files_.end()) return;
  if (const auto mine = published->second.find(selfId_); mine != published->second.end()) {
    if (deleteFile) removePath(mine->second);
    published->second.erase(mine);
  }
  if (published->second.empty()) hub_.files_.erase(published);
}

// The same owners as p2p::chooseClaims (one lease rule, the excluded own nothing); ties by expert
// index instead of a per-key hash (no libsodium in core/).
std::vector<int> MemorySwarm::chooseClaims(const ClaimRequest& request) const {
  const int nExperts = request.nExperts, count = request.count;
  if (nExperts <= 0 || count <= 0) return {};
  std::vector<int> owners(static_cast<std::size_t>(nExperts), 0);
  for (const auto& p : peers())
    if (!request.excluded.count(p.id) &&
        leaseHolds(p.announced.round, p.announced.leaseUntil, request.round, request.leaseRounds))
      for (int e : p.announced.claims)
        if (e >= 0 && e < nExperts) ++owners[static_cast<std::size_t>(e)];
  std::vector<int> order(static_cast<std::size_t>(nExperts));
  for (int e = 0; e < nExperts; ++e) order[static_cast<std::size_t>(e)] = e;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return owners[a] < owners[b]; });
  order.resize(static_cast<std::size_t>(std::min(count, nExperts)));
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace es::node
