// Whether our BEP 10 handshakes tell peers our listen port ("p"). libtorrent sends it on the
// connections it opens; a peer that receives it files the connection under (our IP, that port)
// and closes any other connection already filed there (peer_list::update_peer_port, "duplicate
// peer-id"). Two machines behind one router listening on one port share that key: each
// connection of the second closed the first's or was closed (issue 40; tests/netlab/
// tst_netlab_same_port: 117 such closes at the public peer in 3 minutes, and one machine never met
// anyone). A port nobody can dial is no use to send, so "p" goes out only once the reachability
// self-test proved we can be dialled (or never runs: peers on one host); our own "es_port"
// (p2p/gossip_wire.h) still tells run peers where to dial us back.
#pragma once

#include <libtorrent/extensions.hpp>

#include <atomic>
#include <memory>

namespace es::p2p {

struct ListenPortHint {
  std::atomic<bool> advertise{true};  // written on the session's thread, read on the network thread
};

// The session plugin: every torrent's BitTorrent connections drop "p" from their handshake while
// `hint->advertise` is false.
std::shared_ptr<lt::plugin> makeListenPortPlugin(std::shared_ptr<ListenPortHint> hint);

}  // namespace es::p2p
