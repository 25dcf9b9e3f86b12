// Checkpoint swarms: publish a file as a deterministic hybrid torrent, fetch one by its v2
// info-hash from the run's peers and the DHT, report progress, retire old ones.
#include "p2p/content_limits.h"
#include "p2p/swarm_session_impl.h"
#include "p2p/torrent_maker.h"

#include "core/common/safe_quote.h"

#include <libtorrent/hex.hpp>
#include <libtorrent/peer_info.hpp>
#include <libtorrent/torrent_info.hpp>
#include <libtorrent/torrent_status.hpp>

#include <algorithm>
#include <filesystem>

namespace es::p2p {
namespace {

using Clock = std::chrono::steady_clock;

TransferStatus statusOf(const std::string& hash, const Transfer& t) {
  TransferStatus s;
  s.infoHash = hash;
  if (!t.handle.is_valid()) return s;
  const auto st = t.handle.status();
  s.path = t.name.empty() ? std::string() : (std::filesystem::path(t.saveDir) / t.name).string();
  s.totalBytes = st.total_wanted;
  s.doneBytes = st.total_wanted_done;
  s.uploadedBytes = st.total_payload_upload;
  s.downloadedBytes = st.total_payload_download;
  s.peers = st.num_peers;
  s.finished = t.finished;
  s.seeding = st.is_seeding;
  return s;
}

}  // namespace

Expected<std::string> SwarmSession::publishFile(const std::string& path) {
  return seedMadeTorrent(path, makeTorrent(path));
}

void SwarmSession::publishFileAsync(const std::string& path, std::function<void(Expected<std::string>)> done) {
  // The callback is shared: QThreadPool and QMetaObject take copyable functions only.
  auto callback = std::make_shared<std::function<void(Expected<std::string>)>>(std::move(done));
  impl_->hashing.start([this, path, callback] {
    auto torrent = std::make_shared<Expected<TorrentFile>>(makeTorrent(path));
    // `this` outlives the call: ~SwarmSession waits for the pool before anything else, and a
    // queued call to an object being destroyed is discarded with it.
    QMetaObject::invokeMethod(
        this, [this, path, torrent, callback] { (*callback)(seedMadeTorrent(path, std::move(*torrent))); },
        Qt::QueuedConnection);
  });
}

// On the engine thread: seeds a torrent made from `path` (by publishFile or on the hashing thread).
Expected<std::string> SwarmSession::seedMadeTorrent(const std::string& path, Expected<TorrentFile> torrent) {
  auto& d = *impl_;
  if (!torrent) return makeError(torrent.error());
  if (d.transfers.count(torrent->infoHashV2)) return torrent->infoHashV2;
  lt::add_torrent_params params;
  lt::error_code ec;
  params.ti = std::make_shared<lt::torrent_info>(torrent->bytes, ec, lt::from_span);
  if (ec) return makeError(ec.message());
  params.save_path = std::filesystem::absolute(path).parent_path().string();
  // We just hashed the file: seed at once; pieces are verified again when first requested, so a
  // file damaged on disk later is refused rather than served (docs/ARCHITECTURE.md, "libtorrent notes").
  params.flags |= lt::torrent_flags::seed_mode;
  params.flags &= ~(lt::torrent_flags::auto_managed | lt::torrent_flags::paused);
  auto handle = d.session->add_torrent(std::move(params), ec);
  if (ec) return makeError("cannot seed \"" + path + "\": " + ec.message());
  Transfer t;
  t.handle = handle;
  t.saveDir = std::filesystem::absolute(path).parent_path().string();
  t.name = torrent->name;
  t.published = true;
  t.finished = true;
  t.added = Clock::now();
  d.transfers.emplace(torrent->infoHashV2, std::move(t));
  d.connectRunPeers(handle, d.dialTargets());
  return torrent->infoHashV2;
}

Status SwarmSession::fetch(const std::string& infoHash, const std::string& saveDir, const node::FetchLimits& limits) {
  auto& d = *impl_;
  if (!isInfoHashV2(infoHash)) return makeError("\"" + infoHash + "\" is not a v2 info-hash (64 hex digits)");
  std::string hash = infoHash;
  for (auto& c : hash) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (auto known = d.transfers.find(hash); known != d.transfers.end()) {
    // Asked again for content we hold already (a round gathered again after a resync): say so
    // again, or the asker waits for an event that came before it asked (the netlab: the round
    // trained again after a snapshot closed at its deadline with only our own contribution).
    if (known->second.finished && !known->second.published) {
      const auto path =
          QString::fromStdString((std::filesystem::path(known->second.saveDir) / known->second.name).string());
      QMetaObject::invokeMethod(
          this, [this, hash, path] { Q_EMIT transferFinished(QString::fromStdString(hash), path); },
          Qt::QueuedConnection);
    }
    return {};
  }
  if (d.deferWhileDeleting(hash, saveDir, limits)) return {};  // started once its old files are gone
  std::error_code fsError;
  std::filesystem::create_directories(saveDir, fsError);
  if (fsError) return makeError("cannot create \"" + saveDir + "\": " + fsError.message());
  lt::add_torrent_params params;
  lt::sha256_hash v2;
  lt::aux::from_hex(hash, v2.data());
  params.info_hashes = lt::info_hash_t(v2);
  params.save_path = saveDir;
  params.flags &= ~(lt::torrent_flags::auto_managed | lt::torrent_flags::paused);
  // Until its metadata passed the limits (onMetadata), the torrent is in upload mode: libtorrent
  // then makes no piece request at all, whatever the file list says, while the metadata itself
  // (ut_metadata, not a piece) still arrives. File priorities 0 would not do: they are given per
  // file before the file list is known, and a hostile torrent has as many files as it likes.
  // Paused would not do either: a paused torrent fetches no metadata. Not auto-managed, so
  // libtorrent never takes it out of upload mode by itself (torrent_flags.hpp).
  if (limits.any()) params.flags |= lt::torrent_flags::upload_mode;
  lt::error_code ec;
  auto handle = d.session->add_torrent(std::move(params), ec);
  if (ec) return makeError("cannot fetch " + hash + ": " + ec.message());
  Transfer t;
  t.handle = handle;
  t.saveDir = saveDir;
  t.limits = limits;
  t.awaitingCheck = limits.any();
  t.added = t.lastAnnounce = Clock::now();
  d.transfers.emplace(hash, std::move(t));
  d.connectRunPeers(handle, d.dialTargets());
  handle.force_dht_announce();  // the fallback: the content may also be seeded by others
  return {};
}

void SwarmSession::retire(const std::string& infoHash, bool deleteFile) {
  auto& d = *impl_;
  d.deferredFetches.erase(infoHash);
  auto it = d.transfers.find(infoHash);
  if (it == d.transfers.end()) return;
  if (deleteFile) return d.removeWithFiles(infoHash, it->second.handle);
  d.session->remove_torrent(it->second.handle);
  d.transfers.erase(it);
}

std::vector<TransferStatus> SwarmSession::transfers() const {
  std::vector<TransferStatus> out;
  for (const auto& [hash, t] : impl_->transfers) out.push_back(statusOf(hash, t));
  return out;
}

void SwarmSession::setTransferUploadLimit(const std::string& infoHash, int bytesPerSecond) {
  auto it = impl_->transfers.find(infoHash);
  if (it != impl_->transfers.end()) it->second.handle.set_upload_limit(bytesPerSecond);
}

void SwarmSession::setRateLimits(int uploadBytesPerSecond, int downloadBytesPerSecond) {
  lt::settings_pack pack;
  pack.set_int(lt::settings_pack::upload_rate_limit, std::max(0, uploadBytesPerSecond));
  pack.set_int(lt::settings_pack::download_rate_limit, std::max(0, downloadBytesPerSecond));
  impl_->session->apply_settings(std::move(pack));
}

std::pair<int, int> SwarmSession::rateLimits() const {
  const auto pack = impl_->session->get_settings();
  return {pack.get_int(lt::settings_pack::upload_rate_limit), pack.get_int(lt::settings_pack::download_rate_limit)};
}

Transfer* SwarmSession::Impl::findTransfer(const lt::torrent_handle& handle, std::string* hash) {
  for (auto& [h, t] : transfers)
    if (t.handle == handle) {
      if (hash) *hash = h;
      return &t;
    }
  return nullptr;
}

// Every piece passed, but libtorrent may still hold the last blocks in memory: the file is not
// guaranteed whole on disk at torrent_finished_alert (arvidn/libtorrent#6504, said of 1.2's cache;
// 2.0 queues writes in a store buffer the same way). Most likely what tst_swarm_magnet saw once:
// "the run's torrent held no run.json" right after the manifest's fetch finished. So ask for a
// flush first: cache_flushed_alert comes once the torrent's pending writes are done.
void SwarmSession::Impl::onTransferFinished(const lt::torrent_handle& handle) {
  std::string hash;
  auto* t = findTransfer(handle, &hash);
  if (!t || t->finished || t->awaitingCheck) return;
  t->flushing = true;
  handle.flush_cache();  // again when reconciling dropped alerts: the flush's alert may be lost too
}

void SwarmSession::Impl::onCacheFlushed(const lt::torrent_handle& handle) {
  std::string hash;
  auto* t = findTransfer(handle, &hash);
  if (!t || t->finished || !t->flushing) return;
  t->finished = true;
  if (auto ti = handle.torrent_file()) t->name = ti->name();
  // Every piece passed its hash check (v2: per-file merkle roots from the info-hash) before
  // libtorrent wrote it as valid: the file on disk is the published one.
  Q_EMIT owner->transferFinished(QString::fromStdString(hash),
                                 QString::fromStdString((std::filesystem::path(t->saveDir) / t->name).string()));
}

// The metadata of a fetch with limits: exactly one plain file (pad files aside: they are never
// written) that the limits allow, or the torrent goes, with whatever it created on disk, before a
// piece was requested.
void SwarmSession::Impl::onMetadata(const lt::torrent_handle& handle) {
  std::string hash;
  auto* t = findTransfer(handle, &hash);
  if (!t || !t->awaitingCheck) return;
  const auto ti = handle.torrent_file();
  std::string problem = ti ? contentProblem(*ti, t->limits) : "no metadata";
  if (!problem.empty()) {
    removeWithFiles(hash, handle);
    ++counters.refusedFetches;
    Q_EMIT owner->transferRefused(QString::fromStdString(hash), QString::fromStdString(problem));
    return;
  }
  t->awaitingCheck = false;
  t->name = ti->name();
  if (auto priorities = folderPriorities(*ti, t->limits); !priorities.empty()) handle.prioritize_files(priorities);
  handle.unset_flags(lt::torrent_flags::upload_mode);
}

void SwarmSession::Impl::onTransferError(const lt::torrent_handle& handle, const std::string& message) {
  std::string hash;
  if (!findTransfer(handle, &hash)) return;
  Q_EMIT owner->transferFailed(QString::fromStdString(hash), QString::fromStdString(message));
}

void SwarmSession::Impl::reconcileTransfers() {
  std::vector<lt::torrent_handle> handles;  // onMetadata may erase from `transfers`
  for (const auto& [hash, t] : transfers)
    if (t.handle.is_valid() && !t.published) handles.push_back(t.handle);
  for (const auto& handle : handles) {
    const auto st = handle.status();
    if (st.errc) onTransferError(handle, st.errc.message());
    if (st.has_metadata) onMetadata(handle);  // still awaiting its check: checked now
    if (st.is_finished) onTransferFinished(handle);
  }
}

void SwarmSession::Impl::onStateUpdate(const std::vector<lt::torrent_status>& statuses) {
  for (const auto& st : statuses) {
    std::string hash;
    auto* t = findTransfer(st.handle, &hash);
    if (!t || t->published || st.total_wanted_done == t->lastReportedDone) continue;
    t->lastReportedDone = st.total_wanted_done;
    Q_EMIT owner->transferProgress(QString::fromStdString(hash), st.total_wanted_done, st.total_wanted);
  }
}

// Fetched content is seeded for others up to settings.fetchedSeedRatio × its size, then paused
// (the file stays until the node retires it, two rounds after its round).
void SwarmSession::Impl::limitSeeding(Transfer& t) {
  if (t.published || !t.finished || t.seedingStopped) return;
  const auto st = t.handle.status();
  if (st.total_wanted <= 0 || double(st.total_payload_upload) < settings.fetchedSeedRatio * double(st.total_wanted))
    return;
  t.handle.pause();
  t.seedingStopped = true;
}

// Every few seconds, transfers meet run peers that arrived since (or that had not yet added the
// torrent when we first connected). A download without any peer, and a fresh publication nobody
// has connected to yet (its first announce may have been dropped before the routing table
// filled), also re-announce on the DHT — at most every peerlessFetchAnnounceMs: DHT nodes ban an
// IP that asks too often.
void SwarmSession::Impl::kickTransfers() {
  const auto now = Clock::now();
  const bool connectNow = now - lastPeerKick >= std::chrono::seconds(3);
  if (connectNow) lastPeerKick = now;
  if (connectNow && dialBacks) dialBacks->retryDue();  // the reachability probes' retries (dial_back.h)
  if (connectNow) relinkRun(now);
  releaseOverdueDeletions();
  const auto runPeers = connectNow ? runLinks.targets() : std::vector<lt::tcp::endpoint>{};
  for (auto& [hash, t] : transfers) {
    if (!t.handle.is_valid()) continue;
    if (connectNow) connectRunPeers(t.handle, runPeers);
    if (connectNow) limitSeeding(t);
    const bool fresh = t.published && now - t.added < std::chrono::seconds(20);
    if ((t.finished && !fresh) || now - t.lastAnnounce < std::chrono::milliseconds(settings.peerlessFetchAnnounceMs))
      continue;
    if (t.handle.status().num_peers == 0) {
      t.handle.force_dht_announce();
      t.lastAnnounce = now;
    }
  }
}

}  // namespace es::p2p
