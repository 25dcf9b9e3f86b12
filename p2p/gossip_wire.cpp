#include "p2p/gossip_wire.h"

#include <libtorrent/string_view.hpp>

namespace es::p2p {

GossipHandshake readGossipHandshake(const lt::bdecode_node& handshake) {
  GossipHandshake out;
  if (handshake.type() != lt::bdecode_node::dict_t) return out;
  const auto m = handshake.dict_find_dict("m");
  if (!m) return out;
  // Both are 64-bit integers on the wire: range-check before narrowing.
  const std::int64_t id = m.dict_find_int_value(kGossipExtensionName, 0);
  if (id <= 0 || id > 255) return out;  // an ordinary BitTorrent peer: no gossip
  out.remoteId = static_cast<int>(id);
  for (const char* key : {kDialPortKey, "p"}) {
    const std::int64_t port = handshake.dict_find_int_value(key, 0);
    if (port > 0 && port < 65536) {
      out.dialBackPort = static_cast<int>(port);
      break;
    }
  }
  return out;
}

GossipFragment classifyGossipFragment(int length, std::ptrdiff_t bodySize) {
  // A negative length compares as huge: oversize, like libtorrent's own unsigned view of it.
  if (length < 0 || static_cast<std::size_t>(length) > kMaxGossipMessage) {
    const bool edge = bodySize == 0 || bodySize == static_cast<std::ptrdiff_t>(length);
    return edge ? GossipFragment::Oversize : GossipFragment::Ignore;
  }
  return bodySize == static_cast<std::ptrdiff_t>(length) ? GossipFragment::Complete : GossipFragment::Wait;
}

}  // namespace es::p2p
