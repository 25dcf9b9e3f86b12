// What a swarm session is configured with: our own struct, turned into a libtorrent settings_pack
// in one place (lt_settings.cpp), so nothing above p2p/ sees libtorrent's names.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace es::p2p {

struct SwarmSettings {
  // "IP:PORT" to listen on (TCP and the DHT's UDP), or several separated by commas
  // ("0.0.0.0:P,[::]:P": every IPv4 and IPv6 interface). Port 0 picks a free port (see
  // listenPort()). A volunteer's default is all interfaces; tests use 127.0.0.1:0.
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
  // (docs/ARCHITECTURE.md, "libtorrent notes"). Never on for the internet.
  bool sameHostSwarm = false;
  // Gossip connections one address may hold with us; 0: the default (p2p/gossip_limits.h:
  // kMaxGossipConnectionsPerAddress, none in a same-host swarm). Tests set it to see the cap.
  int gossipConnectionsPerAddress = 0;
  // Timing for peers on one host: no DHT node there bans anyone (sameHostSwarm), and tests want
  // discovery within seconds.
  void useSameHostTiming() {
    firstRetryMs = maxRetryMs = knownPeersMaxRetryMs = 1000;
    steadyLookupMs = steadyAnnounceMs = 15000;
    bep44PollMs = 10000;
    peerlessFetchAnnounceMs = 500;
  }
  // Make rate limits apply to loopback/LAN peers too (libtorrent exempts local peers by default).
  bool limitLocalPeers = false;
  bool enableUtp = true;  // uTP is 2–4× slower on loopback and slows shutdown: tests turn it off
  // Rendezvous timing (docs/ARCHITECTURE.md, "Network defaults"). The defaults are for the internet:
  // every DHT node bans an IP that sends it more than 5 packets/s (libtorrent's DoS blocker,
  // dht_block_ratelimit, for 5 minutes) — which loopback timing did within 6 s off loopback.
  //  - While we are young (first 30 s) or connected to fewer run peers than we hold records of,
  //    we announce + look up the run, first after firstRetryMs, then backing off ×2 up to
  //    maxRetryMs (an announce made before the routing table fills is silently dropped).
  //  - Otherwise: a lookup every steadyLookupMs, an announce every steadyAnnounceMs
  //    (libtorrent's own dht_announce_interval: DHT nodes keep announced peers ~30 minutes).
  //    While the records name run peers we are not connected to (back from a partition, a
  //    dropped link), the back-off stops at knownPeersMaxRetryMs: the netlab's cut peer looked
  //    the run up only every 60 s after its 200 s cut and came back a round late. A lone peer
  //    (no records) keeps the slower cap, for the public DHT's sake.
  int firstRetryMs = 2000;
  int maxRetryMs = 60000;
  int knownPeersMaxRetryMs = 15000;
  int steadyLookupMs = 5 * 60000;
  int steadyAnnounceMs = 15 * 60000;
  // How often the BEP44 items of known peers are fetched (records missed by gossip).
  int bep44PollMs = 60000;
  // How often a download with no peer re-announces on the DHT (its peers are normally the run's
  // peers, connected directly: see SwarmSession::fetch).
  int peerlessFetchAnnounceMs = 30000;
  // Seeding of fetched content stops (the torrent is paused, its file kept for the merge) once it
  // uploaded this many times its size; the node retires it two rounds after its round anyway.
  double fetchedSeedRatio = 3.0;
  // Where the DHT's routing state is saved on exit and loaded from at start (p2p/dht_state.h);
  // empty: neither. A bad file is ignored with a log line.
  std::string dhtStatePath;
  // The reachability self-test (p2p/reachability.h): runs unless sameHostSwarm; `outgoing-only`
  // after this long with DHT nodes but no unsolicited contact.
  int reachabilityGraceSeconds = 90;
  // How long leaving waits for libtorrent's network thread to close (tracker and DHT goodbyes,
  // sockets). Past it we leave without it (SwarmSession::abandonedNetworkThread): everything of
  // ours is saved before the session goes, and a client that does not stop is worse.
  int shutdownTimeoutMs = 20000;
  // libtorrent's alert queue: alerts beyond it are dropped (SwarmSession reconciles its transfers
  // when that happens). Tests shrink it to make the drops happen.
  int alertQueueSize = 10000;
  // Network lines for the log ("Listening on …", "External address: …", "reachability: …", DHT
  // state loaded or ignored), called on the session's thread; may be empty.
  std::function<void(const std::string&)> log;
};

}  // namespace es::p2p
