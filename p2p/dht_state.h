// The DHT's routing state (node ids and the nodes of its buckets), saved on exit and loaded at
// start so a restarted client rejoins through the nodes it knew instead of a bootstrap router.
// Private to p2p/ (names libtorrent). The file is libtorrent's own session-params bencoding with
// only the DHT part ("dht state"), written atomically (temp + fsync + rename).
#pragma once

#include "core/common/expected.h"

#include <libtorrent/kademlia/dht_state.hpp>

#include <string>

namespace es::p2p {

Status writeDhtState(const std::string& path, const lt::dht::dht_state& state);
// Fails with the reason for an unreadable, truncated or foreign file; the caller logs it and
// starts without the state (a damaged cache must never stop the client).
Expected<lt::dht::dht_state> readDhtState(const std::string& path);
// "N nodes": for the log line.
int dhtStateNodes(const lt::dht::dht_state& state);

}  // namespace es::p2p
