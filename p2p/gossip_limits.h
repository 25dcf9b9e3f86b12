// Limits on what one gossip connection may make us do (p2p/record_gossip.cpp applies them on the
// network thread). Pure and clock-free (callers pass milliseconds), so tests reach them directly.
#pragma once

#include "p2p/record_book.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

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

// Gossip connections from one address (an IPv4 address, or an IPv6 /64: one host holds a whole
// /64, so counting single IPv6 addresses would cap nothing). Every limit above is per connection,
// so a host that opens many would multiply them: replays, greetings and the inbox's share. Honest
// peers keep one link each (two for a moment when both dial at once), and several volunteers
// behind one home or office NAT share its address: 8 lets four to eight of them gossip with us
// directly, and a host beyond that gains nothing by opening more. A capped peer still hears
// every record relayed by the others, and its transfers are on other torrents, not capped.
constexpr int kMaxGossipConnectionsPerAddress = 8;

// The cap a session applies: `configured` when set (> 0; tests), else the default — none for a
// same-host swarm (SwarmSettings::sameHostSwarm: listening on loopback, so every peer it can
// ever meet is on this host and shares one address by construction; tests run 12 there).
inline int gossipConnectionsPerAddress(bool sameHostSwarm, int configured) {
  if (configured > 0) return configured;
  return sameHostSwarm ? 0 : kMaxGossipConnectionsPerAddress;
}

// The gossip connections each address holds, at most `perAddress` (0: no cap). Taken when a
// connection starts to gossip (its extension handshake), given back when it closes.
class AddressSlots {
 public:
  explicit AddressSlots(int perAddress = kMaxGossipConnectionsPerAddress) : perAddress_(perAddress) {}
  bool take(const std::string& address) {
    if (perAddress_ > 0 && held(address) >= perAddress_) return false;
    ++held_[address];
    return true;
  }
  void give(const std::string& address) {
    const auto it = held_.find(address);
    if (it != held_.end() && --it->second <= 0) held_.erase(it);
  }
  int held(const std::string& address) const {
    const auto it = held_.find(address);
    return it == held_.end() ? 0 : it->second;
  }
  int most() const {
    int most = 0;
    for (const auto& [address, held] : held_) most = std::max(most, held);
    return most;
  }

 private:
  int perAddress_;
  std::map<std::string, int> held_;  // only addresses holding at least one slot
};

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
