// Which peers the node writes to the ledger on a record event (Ledger::seePeer). Writing every
// peer on every event made N peers cost N² ledger writes per round of announcements, and a
// flooder advancing many keys quickly could fill the ledger queue; now a peer is written when it
// is new, or when its record changed (new seq) and its last write is at least kRewriteMs old.
// Header-only and clock-free (the caller passes milliseconds), so tests need no node.
#pragma once

#include "core/common/ids.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace es::node {

class PeerSightings {
 public:
  // A minute: the ledger's last-seen is for people reading the history, not for liveness (the
  // node judges that from records), so a minute of lag costs nothing.
  static constexpr std::int64_t kRewriteMs = 60 * 1000;

  // Call for every current peer, between begin() and end(); true: write this one now.
  void begin() { next_.clear(); }
  bool due(const PeerId& id, std::int64_t seq, std::int64_t nowMs) {
    const auto it = seen_.find(id);
    const bool write = it == seen_.end() || (it->second.seq != seq && nowMs - it->second.writtenMs >= kRewriteMs);
    next_[id] = write ? Sighting{seq, nowMs} : it->second;
    return write;
  }
  // Peers no longer listed are forgotten, so this holds at most one entry per current peer.
  void end() { seen_.swap(next_); }
  std::size_t size() const { return seen_.size(); }

 private:
  struct Sighting {
    std::int64_t seq;
    std::int64_t writtenMs;
  };
  std::map<PeerId, Sighting> seen_, next_;
};

}  // namespace es::node
