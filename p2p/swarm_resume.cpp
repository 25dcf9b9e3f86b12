// saveFetchState: a fetched transfer's libtorrent resume data, written to a file of our choice
// (p2p/run_torrent_file.h reads it back for joinRun).
#include "p2p/swarm_session_impl.h"

#include "core/common/atomic_file.h"

#include <libtorrent/write_resume_data.hpp>

namespace es::p2p {

Status SwarmSession::saveFetchState(const std::string& infoHash, const std::string& path) {
  auto& d = *impl_;
  std::string hash = infoHash;
  for (auto& c : hash) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto it = d.transfers.find(hash);
  if (it == d.transfers.end() || !it->second.handle.is_valid() || !it->second.finished)
    return makeError("no finished transfer " + infoHash + " to save");
  d.stateFiles[hash] = path;
  // The info dict is needed: the file is all joinRun gets. The cache is flushed first, so the
  // pieces it says we have are on disk.
  it->second.handle.save_resume_data(lt::torrent_handle::save_info_dict | lt::torrent_handle::flush_disk_cache);
  return {};
}

void SwarmSession::Impl::onResumeData(const lt::torrent_handle& handle, const lt::add_torrent_params* params,
                                      const std::string& error) {
  std::string hash;
  if (!findTransfer(handle, &hash)) return;
  const auto it = stateFiles.find(hash);
  if (it == stateFiles.end()) return;
  const std::string path = it->second;
  stateFiles.erase(it);
  std::string problem = error;
  if (params) {
    const auto bytes = lt::write_resume_data_buf(*params);
    if (auto s = writeFileAtomically(path, std::string(bytes.begin(), bytes.end())); !s) problem = s.error();
  }
  Q_EMIT owner->fetchStateSaved(QString::fromStdString(hash), QString::fromStdString(problem));
}

}  // namespace es::p2p
