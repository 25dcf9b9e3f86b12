// The reachability self-test: can strangers on the internet open a connection to us, or do we
// only ever reach out? Plain types only (no libtorrent, no Qt), so its rules are unit-tested with
// made-up addresses; p2p/network_monitor.cpp feeds it from the session's alerts.
//
// Definition. Proof of reachability is an *unsolicited contact*: an incoming peer connection or an
// incoming DHT query from an IP address we have never sent anything to. A NAT without a port
// mapping only lets through replies from endpoints we contacted, so behind one this never fires;
// a reply, or a query from a node we queried first, proves nothing. Addresses we sent to are kept
// in a bounded set (kMaxRemembered, oldest forgotten first) and compared by IP, not IP:port — a
// NAT may let a contacted host through on any port, so matching the IP is the conservative choice.
// One exception: an incoming *TCP* connection proves reachability whoever sends it. Our outgoing
// TCP connections leave from ephemeral ports, so no NAT state matches a SYN to our listening
// port: only a mapping or a forward lets it in. (Rendezvous dials are TCP for this reason:
// SwarmSession's dht_get_peers_reply; in a small swarm every peer has talked to every other
// before anyone dials, and the IP rule alone never fires. For the same reason a run peer we
// connected to dials us back once: p2p/record_gossip.h.)
// A contact from one of our own addresses is ourselves (a self-dial through the DHT's copy of
// our announcement), never a proof.
//
// States: `checking` until proof or until the grace period has passed since the session first
// had DHT nodes (no nodes: we are not on the network yet, nobody could have found us); then
// `outgoing-only`. Proof → `reachable via port mapping` when a UPnP/NAT-PMP mapping succeeded,
// else `reachable`. A later proof upgrades `outgoing-only`; nothing downgrades a proven state.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <unordered_set>

namespace es::p2p {

class Reachability {
 public:
  using Clock = std::chrono::steady_clock;
  enum class State { Checking, Reachable, ReachableViaPortMapping, OutgoingOnly };
  static constexpr std::size_t kMaxRemembered = 4096;

  explicit Reachability(std::chrono::seconds grace = std::chrono::seconds(90)) : grace_(grace) {}

  // We sent a DHT packet to `ip` or dialled a peer at `ip`.
  void noteOutgoing(const std::string& ip);
  // Someone at `ip` contacted us (`what`: "incoming connection", "DHT query"). True when the state
  // changed (the contact was unsolicited and proved something new).
  bool noteIncoming(const std::string& ip, const std::string& what, bool tcpToListenPort = false);
  // A port mapping succeeded: the router forwards `externalPort` to us; `method` "UPnP" or
  // "NAT-PMP". A mapping alone proves nothing (the router may sit behind another NAT).
  void notePortMapped(int externalPort, const std::string& method);
  // Our IP as others see it (DHT nodes, peers, the router) and our listen port: for the detail.
  void noteExternalAddress(const std::string& ip) { externalIp_ = ip; }
  void setListenPort(int port) { listenPort_ = port; }
  // An address of this machine (what libtorrent listens on): contacts from it are ourselves.
  void noteOwnAddress(const std::string& ip) { own_.insert(ip); }
  // Call regularly (e.g. with each stats update): starts the grace period once nodes > 0 and
  // declares `outgoing-only` when it has passed. True when the state changed.
  bool tick(int dhtNodes, Clock::time_point now);

  State state() const { return state_; }
  std::string detail() const;
  // "reachability: <state>" + " (<detail>)" when there is one: the line the client prints.
  std::string line() const;
  static const char* stateName(State state);

 private:
  bool setState(State state);
  std::string external(int port) const;  // "198.18.1.2:6881", or "port 6881" before the IP is known

  std::chrono::seconds grace_;
  State state_ = State::Checking;
  std::unordered_set<std::string> contacted_;
  std::deque<std::string> contactedOrder_;  // eviction order of contacted_
  std::unordered_set<std::string> own_;     // this machine's addresses (a handful)
  std::optional<Clock::time_point> onlineSince_;
  std::string proof_;  // "DHT query from 198.51.100.7"
  int mappedPort_ = 0, listenPort_ = 0;
  std::string mappingMethod_;  // "UPnP" / "NAT-PMP", empty: no mapping
  std::string externalIp_;
};

}  // namespace es::p2p
