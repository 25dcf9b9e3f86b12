// The record gossip: a BEP10 extension message ("es_record") on the run torrent's connections.
// Private to p2p/ (it is the one file besides swarm_session.cpp that speaks libtorrent's plugin API).
//
// Threads: libtorrent calls the plugin on its network thread. Everything crosses to the engine
// thread through GossipHub, under its mutex: received bytes go to `inbox` (then `wake()` posts a
// queued call to the engine), and bytes to send go to `outbox`, flushed to every connected
// extension peer when the engine wakes the network thread (GossipHub users call
// session.post_dht_stats(); the plugin flushes on that alert) or on the next session tick. Validation and relaying
// decisions are the engine's (RecordBook): the plugin moves bytes and nothing else.
#pragma once

#include <libtorrent/extensions.hpp>
#include <libtorrent/socket.hpp>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace es::p2p {

constexpr const char* kGossipExtensionName = "es_record";
constexpr std::size_t kMaxGossipMessage = 2048;  // a record is ≤ 1000 bytes; larger is abuse
constexpr std::size_t kMaxDialBacks = 64;        // queued dial-back requests; more are dropped

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
  // Every run peer we get a connection with (either direction), at the IP of that connection and
  // the listen port of its BEP10 handshake ("p"), to be dialled once over TCP
  // (SwarmSession::Impl::dialBack). Why: in a small swarm everyone is connected to everyone after
  // a minute, mostly over uTP, so a peer's reachability self-test may never see a stranger's SYN
  // even with a working port mapping (the netlab: a NAT-PMP peer dialled only over uTP said
  // outgoing-only). Only the connection's own IP is ever dialled: nobody can aim us at a third party.
  std::deque<lt::tcp::endpoint> dialBack;
};

// The session plugin; attach with session.add_extension(). Only the torrent added with
// `userdata = runTag(hub)` gets the gossip.
std::shared_ptr<lt::plugin> makeGossipPlugin(std::shared_ptr<GossipHub> hub);
lt::client_data_t runTag(GossipHub* hub);

}  // namespace es::p2p
