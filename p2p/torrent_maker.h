// Deterministic hybrid (BitTorrent v1 + v2) torrents of a file or a folder: no creation date, no
// creator, no file attributes or mtimes, a fixed piece size. The same bytes therefore give the same
// info-hash on every machine — the bundled default run has one run id everywhere, and any standard
// BitTorrent client can fetch a published snapshot.
#pragma once

#include "core/common/expected.h"

#include <cstdint>
#include <string>

namespace es::p2p {

constexpr int kDefaultPieceSize = 256 * 1024;

struct TorrentFile {
  std::string bytes;       // the .torrent (bencoded)
  std::string infoHashV1;  // hex, 40 characters
  std::string infoHashV2;  // hex, 64 characters (the id used in records and run ids)
  std::string name;        // file or folder name
  std::int64_t totalBytes = 0;
};

Expected<TorrentFile> makeTorrent(const std::string& path, int pieceSize = kDefaultPieceSize);

// Reads a .torrent file and checks that it is a hybrid torrent.
Expected<TorrentFile> loadTorrent(const std::string& torrentPath);

// The first file (its path inside the torrent) whose bytes differ between two torrents of the same
// layout — by v2 merkle root, or a file one lacks — or "" when all agree.
std::string firstDifferingFile(const TorrentFile& expected, const TorrentFile& actual);

// True for exactly 64 lower- or upper-case hex digits.
bool isInfoHashV2(const std::string& hex);

}  // namespace es::p2p
