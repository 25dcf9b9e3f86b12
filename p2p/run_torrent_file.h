// The run torrent as joinRun adds it: from a .torrent (a run made here, or run.json alone), or from
// a libtorrent resume file that saveFetchState wrote for a prepared run fetched in part — such a
// folder cannot be hashed into its torrent again (it lacks the shards this peer did not fetch),
// and the resume file keeps the metadata, the merkle trees and which files it holds.
#pragma once

#include "core/common/expected.h"
#include "p2p/torrent_maker.h"

#include <libtorrent/add_torrent_params.hpp>

#include <string>

namespace es::p2p {

struct RunTorrent {
  TorrentFile torrent;  // infoHashV2 is the run id; bytes are empty for a resume file
  lt::add_torrent_params params;
};

// `path` ending in ".resume": a resume file (with its info dict); else a .torrent.
Expected<RunTorrent> loadRunTorrent(const std::string& path);

}  // namespace es::p2p
