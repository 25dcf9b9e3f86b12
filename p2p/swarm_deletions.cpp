// Content removed with its files: libtorrent deletes them on its disk threads after
// remove_torrent returned, and says when (torrent_deleted_alert, or torrent_delete_failed_alert).
// A fetch of the same content started before then downloads into the same path, and the old
// deletion may remove the new file after it was reported whole. The likely cause (not reproduced
// on its own: without this wait tst_swarm_fetch aFetchRightAfterARetireKeepsItsFile passed 10 of 10
// runs here) of what tst_swarm_adversary showed at afd6a98 under load: a newcomer's snapshot,
// fetched again after libtorrent's "v1 and v2 hashes do not describe the same data", was gone when
// the trainer opened it. So such a fetch waits for the deletion.
#include "p2p/swarm_session_impl.h"

#include <vector>

namespace es::p2p {
namespace {

// A deletion's alert lost in a full queue must not hold a fetch for ever: one not confirmed in
// this long is taken as done (the alert came at once in the test above: its six fetches again
// took 8-9 s in all; with the alerts ignored, each waited this long).
constexpr auto kDeletionWait = std::chrono::seconds(30);

}  // namespace

void SwarmSession::Impl::removeWithFiles(const std::string& hash, const lt::torrent_handle& handle) {
  session->remove_torrent(handle, lt::session::delete_files);
  transfers.erase(hash);
  deleting[hash] = std::chrono::steady_clock::now();
}

bool SwarmSession::Impl::deferWhileDeleting(const std::string& hash, const std::string& saveDir,
                                            const node::FetchLimits& limits) {
  if (!deleting.count(hash)) return false;
  deferredFetches[hash] = {saveDir, limits};
  return true;
}

void SwarmSession::Impl::onFilesDeleted(const lt::info_hash_t& hashes) { filesDeleted(v2Hex(hashes)); }

bool SwarmSession::removingFiles(const std::string& infoHash) const { return impl_->deleting.count(infoHash) > 0; }

void SwarmSession::Impl::filesDeleted(const std::string& hash) {
  if (deleting.erase(hash)) Q_EMIT owner->filesRemoved(QString::fromStdString(hash));
  const auto deferred = deferredFetches.find(hash);
  if (deferred == deferredFetches.end()) return;
  const DeferredFetch fetch = std::move(deferred->second);
  deferredFetches.erase(deferred);
  if (auto s = owner->fetch(hash, fetch.saveDir, fetch.limits); !s)
    Q_EMIT owner->transferFailed(QString::fromStdString(hash), QString::fromStdString(s.error()));
}

void SwarmSession::Impl::releaseOverdueDeletions() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> overdue;
  for (const auto& [hash, since] : deleting)
    if (now - since >= kDeletionWait) overdue.push_back(hash);
  for (const auto& hash : overdue) filesDeleted(hash);
}

}  // namespace es::p2p
