#include "p2p/torrent_maker.h"

#include "core/common/atomic_file.h"

#include <libtorrent/bencode.hpp>
#include <libtorrent/create_torrent.hpp>
#include <libtorrent/hex.hpp>
#include <libtorrent/torrent_info.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iterator>
#include <map>
#include <sstream>

namespace es::p2p {
namespace {

namespace fs = std::filesystem;

template <typename Hash>
std::string hexOf(const Hash& h) {
  return lt::aux::to_hex(h);
}

Expected<TorrentFile> describe(const lt::torrent_info& ti, std::string bytes) {
  const auto hashes = ti.info_hashes();
  if (!hashes.has_v1() || !hashes.has_v2()) return makeError("not a hybrid (v1 + v2) torrent");
  TorrentFile t;
  t.bytes = std::move(bytes);
  t.infoHashV1 = hexOf(hashes.v1);
  t.infoHashV2 = hexOf(hashes.v2);
  t.name = ti.name();
  t.totalBytes = ti.total_size();
  return t;
}

}  // namespace

Expected<TorrentFile> makeTorrent(const std::string& path, int pieceSize) {
  std::error_code fsError;
  const fs::path p = fs::absolute(path, fsError);
  if (fsError || !fs::exists(p, fsError)) return makeError("cannot publish \"" + path + "\": no such file or folder");
  try {
    lt::file_storage files;
    // Hidden files and the partial files of our own atomic writes are never part of a torrent.
    lt::add_files(
        files, p.string(),
        [](const std::string& f) {
          const auto name = fs::path(f).filename().string();
          return name.empty() || (name[0] != '.' && name.find(".tmp-") == std::string::npos);
        },
        lt::create_torrent::no_attributes);  // mode bits differ between machines
    if (files.num_files() == 0) return makeError("cannot publish \"" + path + "\": nothing to share in it");
    if (files.total_size() == 0) return makeError("cannot publish \"" + path + "\": it is empty");
    lt::create_torrent ct(files, pieceSize, lt::create_torrent::no_attributes);
    ct.set_creation_date(0);
    lt::error_code ec;
    lt::set_piece_hashes(ct, p.parent_path().string(), ec);
    if (ec) return makeError("cannot hash \"" + path + "\": " + ec.message());
    std::string bytes;
    lt::bencode(std::back_inserter(bytes), ct.generate());
    lt::torrent_info ti(bytes, lt::from_span);
    return describe(ti, std::move(bytes));
  } catch (const std::exception& e) {
    return makeError("cannot make a torrent of \"" + path + "\": " + e.what());
  }
}

Expected<TorrentFile> loadTorrent(const std::string& torrentPath) {
  auto bytes = readWholeFile(torrentPath);
  if (!bytes) return makeError(bytes.error());
  lt::error_code ec;
  lt::torrent_info ti(*bytes, ec, lt::from_span);
  if (ec) return makeError("\"" + torrentPath + "\" is not a valid torrent: " + ec.message());
  auto t = describe(ti, std::move(*bytes));
  if (!t) return makeError("\"" + torrentPath + "\": " + t.error());
  return t;
}

std::string firstDifferingFile(const TorrentFile& expected, const TorrentFile& actual) {
  lt::error_code ec1, ec2;
  const lt::torrent_info a(expected.bytes, ec1, lt::from_span), b(actual.bytes, ec2, lt::from_span);
  if (ec1 || ec2) return "(a torrent that does not parse)";
  std::map<std::string, lt::sha256_hash> roots;
  for (const auto i : b.files().file_range())
    if (!b.files().pad_file_at(i)) roots[b.files().file_path(i)] = b.files().root(i);
  for (const auto i : a.files().file_range()) {
    if (a.files().pad_file_at(i)) continue;
    const auto it = roots.find(a.files().file_path(i));
    if (it == roots.end() || it->second != a.files().root(i)) return a.files().file_path(i);
    roots.erase(it);
  }
  return roots.empty() ? std::string() : roots.begin()->first;
}

bool isInfoHashV2(const std::string& hex) {
  return hex.size() == 64 && std::all_of(hex.begin(), hex.end(), [](unsigned char c) { return std::isxdigit(c); });
}

}  // namespace es::p2p
