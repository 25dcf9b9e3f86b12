#include "p2p/content_limits.h"

#include "core/common/safe_quote.h"

#include <algorithm>

namespace es::p2p {
namespace {

// More than any folder we fetch holds (a prepared run: kMaxPreparedShards shards and three files),
// so the caller's rule never walks an attacker's million-entry list.
constexpr std::size_t kMaxFolderFiles = 8192;

std::string joined(const std::vector<std::int64_t>& sizes) {
  std::string out;
  for (const auto s : sizes) out += (out.empty() ? "" : " or ") + std::to_string(s);
  return out;
}

// A folder torrent: every file plain, below the folder, each path component plain; then the
// caller's rule.
std::string folderProblem(const lt::torrent_info& ti, const node::FetchLimits& limits) {
  const auto& files = ti.files();
  if (!isPlainName(ti.name())) return "a folder name that is not 1-128 characters of [A-Za-z0-9._-]";
  node::FetchLimits::FolderFiles listed;
  const std::string prefix = ti.name() + "/";
  for (const auto i : files.file_range()) {
    if (files.pad_file_at(i)) continue;
    if (files.file_flags(i)) return "a file with attributes (a symlink, executable or hidden), expected plain files";
    const std::string path = files.file_path(i);
    if (path.rfind(prefix, 0) != 0) return "a file outside the torrent's folder";
    const std::string relative = path.substr(prefix.size());
    for (std::size_t begin = 0; begin <= relative.size();) {
      const std::size_t end = std::min(relative.find('/', begin), relative.size());
      if (!isPlainName(std::string_view(relative).substr(begin, end - begin)))
        return "a path that is not made of 1-128 characters of [A-Za-z0-9._-] between slashes";
      begin = end + 1;
    }
    listed.emplace_back(relative, files.file_size(i));
    if (listed.size() > kMaxFolderFiles) return "more than " + std::to_string(kMaxFolderFiles) + " files";
  }
  return limits.folder(ti.name(), listed);
}

}  // namespace

std::string contentProblem(const lt::torrent_info& ti, const node::FetchLimits& limits) {
  const auto& files = ti.files();
  int count = 0;
  lt::file_index_t file{};
  for (const auto i : files.file_range()) {
    if (files.pad_file_at(i)) continue;
    ++count;
    file = i;
  }
  if (limits.folder && (count != 1 || files.file_path(file) != ti.name())) return folderProblem(ti, limits);
  if (count != 1) return std::to_string(count) + " files, expected exactly one";
  // libtorrent makes a symlink file a link on disk as soon as it checks the files, before any
  // piece: one pointing anywhere would sit in the fetch's folder. Ours never carry attributes.
  if (files.file_flags(file)) return "a file with attributes (a symlink, executable or hidden), expected a plain file";
  // The name becomes the file's path under the fetch's folder and appears in log lines; the path
  // must be the name itself (a file at the torrent's root).
  if (!isPlainName(ti.name()) || files.file_path(file) != ti.name())
    return "a file name that is not 1-128 characters of [A-Za-z0-9._-]";
  if (!limits.name.empty() && ti.name() != limits.name)
    return "a file named \"" + ti.name() + "\", expected \"" + limits.name + "\"";
  const std::int64_t bytes = files.file_size(file);
  if (limits.maxBytes > 0 && bytes > limits.maxBytes)
    return "a file of " + std::to_string(bytes) + " bytes, more than the " + std::to_string(limits.maxBytes) +
           " allowed";
  if (limits.sizes.empty() || std::find(limits.sizes.begin(), limits.sizes.end(), bytes) != limits.sizes.end())
    return {};
  return "a file of " + std::to_string(bytes) + " bytes, expected " + joined(limits.sizes) +
         " (the size its sender's claimed experts predict)";
}

std::vector<lt::download_priority_t> folderPriorities(const lt::torrent_info& ti, const node::FetchLimits& limits) {
  const auto& files = ti.files();
  if (!limits.folder || !limits.folderWanted || files.num_files() < 1) return {};
  const std::string prefix = ti.name() + "/";
  node::FetchLimits::FolderFiles listed;
  for (const auto i : files.file_range()) {
    const std::string path = files.file_path(i);
    if (files.pad_file_at(i)) continue;
    if (path.rfind(prefix, 0) != 0) return {};  // one file, not a folder (a run.json alone): all of it
    listed.emplace_back(path.substr(prefix.size()), files.file_size(i));
  }
  const auto wanted = limits.folderWanted(listed);
  std::vector<lt::download_priority_t> priorities(std::size_t(files.num_files()), lt::default_priority);
  for (const auto i : files.file_range()) {
    const std::string path = files.file_path(i);
    if (!files.pad_file_at(i) && path.rfind(prefix, 0) == 0 && !wanted.count(path.substr(prefix.size())))
      priorities[std::size_t(static_cast<int>(i))] = lt::dont_download;
  }
  return priorities;
}

}  // namespace es::p2p
