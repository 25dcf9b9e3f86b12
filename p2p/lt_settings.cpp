#include "p2p/lt_settings.h"

#include "p2p/network_monitor.h"

#include <libtorrent/alert.hpp>

#include <algorithm>
#include <cstdlib>

namespace es::p2p {

bool splitEndpoint(const std::string& text, std::string& host, int& port, bool allowZero) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return false;
  host = text.substr(0, colon);
  if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string digits = text.substr(colon + 1);
  if (digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  port = std::atoi(digits.c_str());
  return port <= 65535 && (port > 0 || allowZero);
}

namespace {

using sp = lt::settings_pack;

// The listen list ("IP:PORT[,IP:PORT…]") checked, and the bootstrap nodes joined for libtorrent.
Expected<std::string> checkedBootstrap(const SwarmSettings& s) {
  std::string host;
  int port = 0;
  for (std::size_t start = 0; start <= s.listen.size();) {
    const std::size_t comma = std::min(s.listen.find(',', start), s.listen.size());
    const std::string one = s.listen.substr(start, comma - start);
    if (!splitEndpoint(one, host, port, true)) return makeError("listen address \"" + one + "\" is not IP:PORT");
    start = comma + 1;
  }
  std::string bootstrap;
  for (const auto& node : s.bootstrap) {
    if (!splitEndpoint(node, host, port)) return makeError("bootstrap node \"" + node + "\" is not HOST:PORT");
    bootstrap += (bootstrap.empty() ? "" : ",") + node;
  }
  return bootstrap;
}

// What the session reaches and how: listen, DHT, port mapping, transports, rates, alerts.
void setReach(sp& pack, const SwarmSettings& s, const std::string& bootstrap) {
  pack.set_str(sp::listen_interfaces, s.listen);
  // An empty list would fall back to libtorrent's public default: never in tests, never unasked.
  pack.set_str(sp::dht_bootstrap_nodes, bootstrap);
  pack.set_bool(sp::enable_dht, true);
  pack.set_bool(sp::enable_lsd, s.enableLsd);
  pack.set_bool(sp::enable_upnp, s.enableUpnp);
  pack.set_bool(sp::enable_natpmp, s.enableNatPmp);
  pack.set_bool(sp::enable_ip_notifier, false);
  pack.set_bool(sp::enable_incoming_utp, s.enableUtp);
  pack.set_bool(sp::enable_outgoing_utp, s.enableUtp);
  pack.set_int(sp::upload_rate_limit, s.uploadRateLimit);
  pack.set_int(sp::download_rate_limit, s.downloadRateLimit);
  // dht_operation: without it no dht_get_peers_reply / item alerts arrive.
  const lt::alert_category_t mask =
      lt::alert_category::error | lt::alert_category::status | lt::alert_category::storage | lt::alert_category::dht |
      lt::alert_category::dht_operation | NetworkMonitor::alertCategories(!s.sameHostSwarm);
  const bool trace = std::getenv("ES_P2P_TRACE") != nullptr;  // see SwarmSession::Impl::pump
  pack.set_int(sp::alert_mask, static_cast<int>(static_cast<std::uint32_t>(trace ? lt::alert_category::all : mask)));
  pack.set_int(sp::alert_queue_size, std::max(1, s.alertQueueSize));
  pack.set_str(sp::user_agent, "ExpertSwarm/0.1");
}

// Connections among the run's peers: kept, redialled, and not rationed like a public swarm's.
void setRunConnections(sp& pack) {
  // Seeds of the run torrent must stay connected to each other: those connections carry the
  // record gossip. libtorrent closes seed-to-seed connections by default.
  pack.set_bool(sp::close_redundant_connections, false);
  // Several peers behind one NAT (or on one host) are normal for volunteers.
  pack.set_bool(sp::allow_multiple_connections_per_ip, true);
  // The gossip plugin sends queued records from the session's tick: 100 ms bounds the delay.
  pack.set_int(sp::tick_interval, 100);
  pack.set_int(sp::min_reconnect_time, 1);
  // libtorrent stops dialling an endpoint after 3 failed attempts (made for public swarms, where
  // most listed peers are long gone). Ours are the run's peers: during a 60 s cut of a NAT
  // router's uplink a dialled endpoint fails about 4 times (15 s connect timeout each), and the
  // cut peers' transfers would never dial the others again. 30 (the 5-bit maximum is 31) with the
  // linear back-off (failcount + 1) × min_reconnect_time gives up on a dead endpoint after ~15 minutes.
  pack.set_int(sp::max_failcount, 30);
  pack.set_int(sp::stop_tracker_timeout, 1);
  // Every peer of a round wants every contribution at once, and each peer seeds its own and the
  // ones it fetched for two rounds more: ~3 (n−1) torrents, each connected to up to n−1 peers.
  // libtorrent's defaults are made for public swarms: 200 connections and 8 unchoke slots for
  // the whole session (rotated every 15 s). With 12 netlab peers, rounds 3 and 4 closed at their
  // deadlines with 5–10 of 12 contributions. Uploads share the uplink by bandwidth instead; the
  // connection cap still bounds what strangers can open.
  pack.set_int(sp::connections_limit, 1000);
  pack.set_int(sp::unchoke_slots_limit, -1);
  // Small files (contributions) should never wait for a slot.
  pack.set_int(sp::active_downloads, -1);
  pack.set_int(sp::active_seeds, -1);
  pack.set_int(sp::active_limit, -1);
}

}  // namespace

Expected<lt::settings_pack> toSettingsPack(const SwarmSettings& s) {
  const auto bootstrap = checkedBootstrap(s);
  if (!bootstrap) return makeError(bootstrap.error());
  sp pack;
  setReach(pack, s, *bootstrap);
  setRunConnections(pack);
  if (s.sameHostSwarm) {
    pack.set_int(sp::dht_block_ratelimit, 100000);
    pack.set_int(sp::dht_block_timeout, 1);
    pack.set_int(sp::dht_upload_rate_limit, 1000000);
    pack.set_bool(sp::dht_restrict_routing_ips, false);
    pack.set_bool(sp::dht_restrict_search_ips, false);
  }
  return pack;
}

}  // namespace es::p2p
