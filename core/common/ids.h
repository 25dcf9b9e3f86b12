// Typed names for the hex strings the swarm passes around (issue 13, item 4). A peer id and a
// content id were both std::string, and a parameter called `id` meant either: Node::ban took a
// peer id, Node::refuse a content id, and nothing but the reader kept them apart. Now the
// compiler does. Construction from text is explicit (the one place a string becomes an id is
// where it is read: a verified record, a hashed file, the ledger); `str()` gives the text back for
// logs, the ledger and the views, which keep plain strings.
//
// Rounds stay plain integers on purpose: they are counted, added to (lease ends, bounds) and
// compared everywhere, and what they could be confused with (steps, seqs) is never passed where
// a round is expected under the same name (docs/ARCHITECTURE.md, "Names").
#pragma once

#include <string>
#include <utility>

namespace es {

template <class Tag>
class HexName {
 public:
  HexName() = default;
  explicit HexName(std::string text) : text_(std::move(text)) {}

  const std::string& str() const { return text_; }
  bool empty() const { return text_.empty(); }

  friend bool operator==(const HexName& a, const HexName& b) { return a.text_ == b.text_; }
  friend bool operator!=(const HexName& a, const HexName& b) { return a.text_ != b.text_; }
  friend bool operator<(const HexName& a, const HexName& b) { return a.text_ < b.text_; }

 private:
  std::string text_;
};

// A peer: hex of BLAKE2b-160 of its ed25519 public key (p2p::peerIdOf), 40 characters.
using PeerId = HexName<struct PeerIdTag>;
// A contribution's or snapshot's content: hex of its torrent's v2 info-hash, 64 characters.
using ContentId = HexName<struct ContentIdTag>;

}  // namespace es
