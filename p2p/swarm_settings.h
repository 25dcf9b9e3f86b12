// What a swarm session is configured with: our own struct, turned into a libtorrent settings_pack
// in one place (lt_settings.cpp), so nothing above p2p/ sees libtorrent's names.
#pragma once

#include <string>
#include <vector>

namespace es::p2p {

struct SwarmSettings {
  // "IP:PORT" to listen on (TCP and the DHT's UDP). Port 0 picks a free port (see listenPort()).
  // A volunteer's default is all interfaces; tests use 127.0.0.1:0.
  std::string listen = "0.0.0.0:6881";
  // DHT nodes to bootstrap from ("host:port"). Empty = this node is the first (it is a bootstrap
  // node itself for the others). Never a public host in tests.
  std::vector<std::string> bootstrap;
  int uploadRateLimit = 0;    // bytes/s, 0 = unlimited
  int downloadRateLimit = 0;  // bytes/s, 0 = unlimited
  bool enableUpnp = false;
  bool enableNatPmp = false;
  bool enableLsd = false;  // LAN mode only
  // All peers on one host (loopback tests, the two-peer demo): relax the DHT's per-IP limits and
  // DoS blocker, which otherwise ban 127.0.0.1 and keep one node per routing table
  // (../shared/LIBTORRENT-FACTS.md). Never on for the internet.
  bool sameHostSwarm = false;
  // Make rate limits apply to loopback/LAN peers too (libtorrent exempts local peers by default).
  bool limitLocalPeers = false;
  bool enableUtp = true;  // uTP is 2–4× slower on loopback and slows shutdown: tests turn it off
  // How often the run torrent re-announces on the DHT while it has fewer peers than records
  // (an announce made before the routing table fills is silently dropped), and afterwards.
  int fastAnnounceMs = 1000;
  int slowAnnounceMs = 15000;
  // How often the BEP44 items of known peers are fetched (records missed by gossip).
  int bep44PollMs = 10000;
};

}  // namespace es::p2p
