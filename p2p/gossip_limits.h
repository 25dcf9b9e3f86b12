// Limits on what one gossip connection may make us do (p2p/record_gossip.cpp applies them on the
// network thread). Pure and clock-free (callers pass milliseconds), so tests reach them directly.
#pragma once

#include "p2p/record_book.h"

#include <algorithm>
#include <cstdint>

namespace es::p2p {

// Steady state: every record is relayed once by each neighbour, and a peer announces at round
// boundaries (seconds apart at the fastest, on loopback tests): a swarm of a few hundred peers
// sends a connection well under 50 records a second. Each message costs an ed25519 verify
// (~50 µs) on the engine thread, so 50/s per connection bounds a flooder to a few percent of a core
// per connection it holds.
constexpr double kGossipMessagesPerSecond = 50;
constexpr double kGossipBurst = 200;  // a round boundary: many peers announce within a second
// A new connection first sends us every record it holds (GossipPeer::on_extension_handshake):
// up to a full book, once, on top of the burst.
constexpr double kGossipGreeting = static_cast<double>(kMaxRecordKeys);
// Messages over 2 KiB are abuse, not a race. Counted in oversize edges (classifyGossipFragment
// reports one or two per message): 6 edges = three to six oversize messages and the connection goes.
constexpr int kMaxOversizePerConnection = 6;
// Records the engine rejected (bad signature, garbage, wrong run…) from one connection before it
// asks the plugin to cut it. Honest peers relay only records they accepted, so any rejection is
// suspicious; a few are tolerated for version skew during an upgrade.
constexpr int kMaxRejectsPerSender = 8;
constexpr std::size_t kMaxGossipInbox = 4096;  // ~2 s of 50/s × 40 connections; ≤ 8 MB of 2 KiB messages
constexpr std::size_t kMaxBadSenders = 256;    // "ip:port" marks awaiting (or past) disconnection

// A token bucket that starts with `initial` tokens (which may exceed `burst`: the greeting) and
// refills at `perSecond` up to `burst`.
struct TokenBucket {
  double tokens;
  double perSecond;
  double burst;
  std::int64_t lastMs;

  bool take(std::int64_t nowMs) {
    if (tokens < burst)
      tokens = std::min(burst, tokens + perSecond * double(std::max<std::int64_t>(0, nowMs - lastMs)) / 1000.0);
    lastMs = nowMs;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  }
};

inline TokenBucket gossipBucket(std::int64_t nowMs) {
  return {kGossipGreeting + kGossipBurst, kGossipMessagesPerSecond, kGossipBurst, nowMs};
}

}  // namespace es::p2p
