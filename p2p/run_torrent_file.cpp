#include "p2p/run_torrent_file.h"

#include "core/common/atomic_file.h"

#include <libtorrent/hex.hpp>
#include <libtorrent/read_resume_data.hpp>
#include <libtorrent/torrent_info.hpp>

namespace es::p2p {

Expected<RunTorrent> loadRunTorrent(const std::string& path) {
  RunTorrent out;
  const bool resume = path.size() > 7 && path.compare(path.size() - 7, 7, ".resume") == 0;
  if (!resume) {
    auto torrent = loadTorrent(path);
    if (!torrent) return makeError(torrent.error());
    lt::error_code ec;
    out.params.ti = std::make_shared<lt::torrent_info>(torrent->bytes, ec, lt::from_span);
    if (ec) return makeError("run torrent: " + ec.message());
    out.torrent = std::move(*torrent);
    return out;
  }
  auto bytes = readWholeFile(path);
  if (!bytes) return makeError(bytes.error());
  lt::error_code ec;
  out.params = lt::read_resume_data(lt::span<const char>(bytes->data(), std::ptrdiff_t(bytes->size())), ec);
  if (ec || !out.params.ti) return makeError("\"" + path + "\" is not a resume file with its torrent: " + ec.message());
  const auto hashes = out.params.ti->info_hashes();
  if (!hashes.has_v1() || !hashes.has_v2()) return makeError("\"" + path + "\": not a hybrid (v1 + v2) torrent");
  out.torrent.infoHashV1 = lt::aux::to_hex(hashes.v1);
  out.torrent.infoHashV2 = lt::aux::to_hex(hashes.v2);
  out.torrent.name = out.params.ti->name();
  out.torrent.totalBytes = out.params.ti->total_size();
  return out;
}

}  // namespace es::p2p
