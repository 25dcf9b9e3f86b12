// The record gossip's decoding (p2p/gossip_wire + p2p/record_book): what one connection hands us.
// Input: frames of [2-byte big-endian length][bytes]; the first frame is the BEP10 extension
// handshake (bencoded, decoded by libtorrent as on the wire), each later one an es_record message
// whose declared length is the frame's (a short last frame is a partial fragment). Complete
// messages go into one RecordBook, as SwarmSession::Impl::drainGossip does.
#include "fuzz_corpus_constants.h"
#include "fuzz_target.h"
#include "p2p/gossip_wire.h"
#include "p2p/record_book.h"

#include <libtorrent/bdecode.hpp>
#include <libtorrent/error_code.hpp>

#include <algorithm>

namespace {

// The next frame of `in` (consumed); `declared` is its length field.
std::string_view nextFrame(std::string_view& in, int& declared) {
  if (in.size() < 2) {
    in = {};
    declared = -1;
    return {};
  }
  declared = (static_cast<unsigned char>(in[0]) << 8) | static_cast<unsigned char>(in[1]);
  const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(declared), in.size() - 2);
  const std::string_view frame = in.substr(2, n);
  in.remove_prefix(2 + n);
  return frame;
}

}  // namespace

ES_FUZZ_TARGET(gossip) {
  std::string_view in = fuzzBytes(data, size);
  int declared = 0;
  const std::string_view handshakeBytes = nextFrame(in, declared);
  lt::error_code ec;
  const lt::bdecode_node handshake =
      lt::bdecode({handshakeBytes.data(), static_cast<std::ptrdiff_t>(handshakeBytes.size())}, ec);
  const es::p2p::GossipHandshake peer = ec ? es::p2p::GossipHandshake{} : es::p2p::readGossipHandshake(handshake);
  ES_FUZZ_CHECK(peer.remoteId >= 0 && peer.remoteId <= 255 && peer.dialBackPort >= 0 && peer.dialBackPort <= 65535);
  if (peer.remoteId == 0) return false;  // no gossip on this connection: messages are not ours

  es::p2p::RecordBook book(es::fuzz::kRunId);
  int accepted = 0;
  while (!in.empty()) {
    const std::string_view message = nextFrame(in, declared);
    if (es::p2p::classifyGossipFragment(declared, static_cast<std::ptrdiff_t>(message.size())) !=
        es::p2p::GossipFragment::Complete)
      continue;
    const auto result = book.offer(message, "fuzz");
    if (result.outcome == es::p2p::OfferOutcome::Accepted) ++accepted;
  }
  ES_FUZZ_CHECK(book.size() <= static_cast<std::size_t>(accepted));
  return accepted > 0;
}
