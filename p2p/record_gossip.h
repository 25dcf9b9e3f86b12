// The record gossip: a BEP10 extension message ("es_record") on the run torrent's connections.
// Private to p2p/ (it is the one file besides swarm_session.cpp that speaks libtorrent's plugin API).
//
// Threads: libtorrent calls the plugin on its network thread. Everything crosses to the engine
// thread through GossipHub, under its mutex: received bytes go to `inbox` (then `wake()` posts a
// queued call to the engine), and bytes to send go to `outbox`, flushed to every connected
// extension peer when the engine wakes the network thread (GossipHub users call
// session.post_dht_stats(); the plugin flushes on that alert) or on the next session tick. Validation and relaying
// decisions are the engine's (RecordBook): the plugin moves bytes, and enforces the per-connection
// limits of p2p/gossip_limits.h (token bucket, oversize strikes, and the engine's "bad sender"
// marks, which it carries back through the hub: the verdicts are made on the engine thread, the
// disconnect must happen on the network thread).
#pragma once

#include "p2p/gossip_limits.h"
#include "p2p/gossip_wire.h"

#include <libtorrent/extensions.hpp>
#include <libtorrent/socket.hpp>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace es::p2p {

constexpr std::size_t kMaxDialBacks = 64;  // queued dial-back requests; more are dropped

struct GossipInbound {
  std::string bytes;
  std::string sender;  // "ip:port" of the connection it came on
};

struct GossipHub {
  std::mutex mutex;
  std::deque<GossipInbound> inbox;
  std::deque<std::string> outbox;
  // Every record we currently hold (pk → bytes): given in full to each new extension peer.
  std::map<std::string, std::string> current;
  std::function<void()> wake;  // set before the plugin is added; called with the mutex released
  int oversizeMessages = 0;
  int inboxDropped = 0;  // complete messages dropped because the inbox held kMaxGossipInbox
  int rateDropped = 0;   // messages over their connection's token bucket
  int disconnects = 0;   // connections the plugin cut (oversize strikes or a bad-sender mark)
  // Gossip connections per address (gossipAddressKey), capped (p2p/gossip_limits.h); the session
  // sets the cap before the run torrent is added. `addressCapped`: connections cut because their
  // address held all its slots already.
  AddressSlots gossipSlots;
  int addressCapped = 0;
  // "ip:port" of connections the engine found sending garbage (kMaxRejectsPerSender rejected
  // records), oldest first, at most kMaxBadSenders: the plugin disconnects them on its next tick.
  std::deque<std::string> badSenders;
  // Every run peer we get a connection with (either direction), at the IP of that connection and
  // the port its BEP10 handshake gives ("es_port", else "p": gossip_wire.h), to be dialled once over TCP
  // (SwarmSession::Impl::dialBack). Why: in a small swarm everyone is connected to everyone after
  // a minute, mostly over uTP, so a peer's reachability self-test may never see a stranger's SYN
  // even with a working port mapping (the netlab: a NAT-PMP peer dialled only over uTP said
  // outgoing-only). Only the connection's own IP is ever dialled: nobody can aim us at a third party.
  std::deque<lt::tcp::endpoint> dialBack;
  // The TCP port strangers dial us at (NetworkMonitor::dialPort), sent in our handshake as
  // "es_port"; 0 (same-host swarms, no self-test): not sent.
  int dialPort = 0;
};

// Both with hub.mutex held. queueInbound: false (and counted) when the inbox is full — the newest
// is dropped, so what is queued already (maybe an honest burst) is not pushed out by a flood.
bool queueInbound(GossipHub& hub, GossipInbound message);
void markBadSender(GossipHub& hub, const std::string& sender);
bool isBadSender(const GossipHub& hub, const std::string& sender);

// What AddressSlots counts a connection under: an IPv4 address (IPv4-mapped IPv6 ones as IPv4),
// or the /64 an IPv6 address is in ("2001:db8:1:2::/64").
std::string gossipAddressKey(const lt::address& address);

// The session plugin; attach with session.add_extension(). Only the torrent added with
// `userdata = runTag(hub)` gets the gossip.
std::shared_ptr<lt::plugin> makeGossipPlugin(std::shared_ptr<GossipHub> hub);
lt::client_data_t runTag(GossipHub* hub);

}  // namespace es::p2p
