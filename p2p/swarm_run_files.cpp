// The run torrent's files, for a prepared run of which this peer holds some shards (issue 40):
// which files to hold, whether they are here, and dropping the ones it no longer needs.
#include "p2p/swarm_session_impl.h"

#include <libtorrent/torrent_info.hpp>
#include <libtorrent/torrent_status.hpp>

#include <filesystem>

namespace es::p2p {
namespace {

// Index → path below the torrent's folder, for every real file (pad files aside).
std::vector<std::pair<lt::file_index_t, std::string>> folderFiles(const lt::torrent_info& ti) {
  std::vector<std::pair<lt::file_index_t, std::string>> out;
  const auto& files = ti.files();
  const std::string prefix = ti.name() + "/";
  for (const auto i : files.file_range()) {
    const std::string path = files.file_path(i);
    if (!files.pad_file_at(i) && path.rfind(prefix, 0) == 0) out.emplace_back(i, path.substr(prefix.size()));
  }
  return out;
}

}  // namespace

Status SwarmSession::setRunFiles(const std::set<std::string>& wanted) {
  auto& d = *impl_;
  const auto ti = d.runHandle.is_valid() ? d.runHandle.torrent_file() : nullptr;
  if (!ti) return makeError("no run torrent with its metadata");
  auto priorities = d.runHandle.get_file_priorities();
  for (const auto& [i, path] : folderFiles(*ti))
    priorities[std::size_t(static_cast<int>(i))] = wanted.count(path) ? lt::default_priority : lt::dont_download;
  d.runHandle.prioritize_files(priorities);
  return {};
}

bool SwarmSession::runFilesComplete(const std::set<std::string>& files) const {
  auto& d = *impl_;
  const auto ti = d.runHandle.is_valid() ? d.runHandle.torrent_file() : nullptr;
  if (!ti) return false;
  const auto progress = d.runHandle.file_progress(lt::torrent_handle::piece_granularity);
  std::size_t complete = 0;
  for (const auto& [i, path] : folderFiles(*ti))
    if (files.count(path) && progress[std::size_t(static_cast<int>(i))] == ti->files().file_size(i)) ++complete;
  return complete == files.size();
}

Status SwarmSession::dropRunFiles(const std::set<std::string>& files) {
  auto& d = *impl_;
  const auto ti = d.runHandle.is_valid() ? d.runHandle.torrent_file() : nullptr;
  if (!ti) return makeError("no run torrent with its metadata");
  const std::filesystem::path folder = std::filesystem::path(d.runHandle.status().save_path) / ti->name();
  std::string failed;
  for (const auto& [i, path] : folderFiles(*ti)) {
    if (!files.count(path)) continue;
    std::error_code ec;
    std::filesystem::remove(folder / path, ec);
    if (ec) failed = path + ": " + ec.message();
  }
  // libtorrent still counts the removed files' pieces as held and would serve them (and fail on
  // the read): a recheck forgets them. It drops the run torrent's links for the seconds it takes
  // to hash what is held (the relink logic dials them again: p2p/run_links.h).
  d.runHandle.force_recheck();
  if (!failed.empty()) return makeError("cannot delete " + failed);
  return {};
}

}  // namespace es::p2p
