// What the record gossip (record_gossip.cpp) reads from a stranger besides the records themselves:
// the fields of the BEP10 extension handshake it uses and the rule for message fragments. Pure
// functions, so the fuzzer (tests/fuzz/fuzz_gossip.cpp) reaches them without a session.
#pragma once

#include <libtorrent/bdecode.hpp>

#include <cstddef>
#include <cstdint>

namespace es::p2p {

constexpr const char* kGossipExtensionName = "es_record";
constexpr std::size_t kMaxGossipMessage = 2048;  // a record is ≤ 1000 bytes; larger is abuse
// Our own handshake field: the TCP port a stranger dials us at (the router's mapped port when a
// mapping exists, else the listen port), sent on connections in both directions. Why not BEP10's
// "p": libtorrent sends it only on connections it opened, and only while it has not learned an
// external address differing from the connection's local one (session_impl::listen_port(ssl,
// local_addr), 2.0.8 and master) — so a peer behind a NAT stops sending it once DHT nodes told it
// its external IP. The clean CI run of f42960a: the NAT-PMP peer map2 was never dialled back in
// 10 minutes and said outgoing-only despite its working mapping.
constexpr const char* kDialPortKey = "es_port";

struct GossipHandshake {
  int remoteId = 0;      // the peer's message id for es_record (1–255), 0: it does not gossip
  int dialBackPort = 0;  // its "es_port", else its listen port "p" (1–65535); 0: none given
};
GossipHandshake readGossipHandshake(const lt::bdecode_node& handshake);

// libtorrent hands an extension message over in fragments of the declared `length`; only the
// last has bodySize == length.
enum class GossipFragment {
  Wait,      // a fragment of a message that fits: wait for the rest
  Oversize,  // the first or last fragment of a message over kMaxGossipMessage: count it once
  Ignore,    // a middle fragment of an oversize message
  Complete,  // a whole message of at most kMaxGossipMessage bytes
};
GossipFragment classifyGossipFragment(int length, std::ptrdiff_t bodySize);

}  // namespace es::p2p
