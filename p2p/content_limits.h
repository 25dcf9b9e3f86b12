// What a fetch's metadata may describe (node::FetchLimits), judged before any piece is asked for:
// a stranger's torrent could name a thousand files, a link, an executable or a path outside the
// fetch's folder. Contributions and snapshots are one plain file; a prepared run is one folder
// of plain files that the caller's `folder` rule accepts.
#pragma once

#include "core/node/swarm.h"

#include <libtorrent/torrent_info.hpp>

#include <string>
#include <vector>

namespace es::p2p {

// Empty when `ti` is what `limits` allow, else why not (for the log and the sender's ban: numbers
// and our own expectations only, nothing the sender chose).
std::string contentProblem(const lt::torrent_info& ti, const node::FetchLimits& limits);

// The file priorities of an allowed folder torrent whose limits name the files wanted
// (FetchLimits::folderWanted): the others "don't download". Empty: fetch everything.
std::vector<lt::download_priority_t> folderPriorities(const lt::torrent_info& ti, const node::FetchLimits& limits);

}  // namespace es::p2p
