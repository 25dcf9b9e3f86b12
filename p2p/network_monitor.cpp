#include "p2p/network_monitor.h"

#include <libtorrent/alert_types.hpp>
#include <libtorrent/bdecode.hpp>

namespace es::p2p {
namespace {

std::string endpointText(const lt::address& ip, int port) {
  return ip.is_v6() ? "[" + ip.to_string() + "]:" + std::to_string(port) : ip.to_string() + ":" + std::to_string(port);
}

// Global and private IPv4 first (what a peer on the internet or the LAN dials), then IPv6, then
// loopback, link-local last (it needs an interface name to be dialled at all).
int reachRank(const lt::address& ip) {
  if (ip.is_loopback()) return ip.is_v4() ? 2 : 3;
  if (ip.is_v6() && ip.to_v6().is_link_local()) return 4;
  return ip.is_v4() ? 0 : 1;
}

// Only a query is a contact the sender chose to make; replies answer what we sent.
bool isDhtQuery(lt::span<char const> packet) {
  lt::error_code ec;
  const lt::bdecode_node message = lt::bdecode(packet, ec);
  return !ec && message.type() == lt::bdecode_node::dict_t && message.dict_find_string_value("y") == "q";
}

const char* methodName(lt::portmap_transport t) { return t == lt::portmap_transport::upnp ? "UPnP" : "NAT-PMP"; }

}  // namespace

NetworkMonitor::NetworkMonitor(bool selfTest, std::chrono::seconds grace) : selfTest_(selfTest), reachability_(grace) {
  if (selfTest_) lines_.push_back(reachability_.line());  // "reachability: checking", with the start lines
}

lt::alert_category_t NetworkMonitor::alertCategories(bool selfTest) {
  // dht_log carries dht_pkt_alert (every DHT packet, both ways), connect the outgoing peer
  // connections, peer the incoming ones.
  const lt::alert_category_t always = lt::alert_category::status | lt::alert_category::port_mapping;
  return selfTest ? always | lt::alert_category::dht_log | lt::alert_category::connect | lt::alert_category::peer
                  : always;
}

void NetworkMonitor::handle(const lt::alert* a) {
  switch (a->type()) {
    case lt::listen_succeeded_alert::alert_type: {
      const auto* l = static_cast<const lt::listen_succeeded_alert*>(a);
      if (l->socket_type != lt::socket_type_t::tcp && l->socket_type != lt::socket_type_t::utp) return;
      if (!listenPort_ && l->socket_type == lt::socket_type_t::tcp) reachability_.setListenPort(listenPort_ = l->port);
      reachability_.noteOwnAddress(l->address.to_string());
      listening_[{reachRank(l->address), endpointText(l->address, l->port)}].insert(
          l->socket_type == lt::socket_type_t::tcp ? "TCP" : "uTP");
      listeningChanged_ = true;
      return;
    }
    case lt::listen_failed_alert::alert_type:
      lines_.push_back("Network: " + a->message());
      return;
    case lt::external_ip_alert::alert_type: {
      const auto ip = static_cast<const lt::external_ip_alert*>(a)->external_address.to_string();
      if (ip == externalIp_) return;
      externalIp_ = ip;
      reachability_.noteExternalAddress(ip);
      lines_.push_back("External address: " + external() + " (as DHT nodes, peers or the router see us)");
      return;
    }
    case lt::portmap_alert::alert_type: {
      const auto* m = static_cast<const lt::portmap_alert*>(a);
      onPortMapped(m->external_port, m->map_protocol == lt::portmap_protocol::tcp, methodName(m->map_transport));
      return;
    }
    case lt::portmap_error_alert::alert_type: {
      const auto* e = static_cast<const lt::portmap_error_alert*>(a);
      const std::string line =
          std::string("Port mapping via ") + methodName(e->map_transport) + " failed: " + e->error.message();
      if (reported_.insert(line).second) lines_.push_back(line);
      return;
    }
    default:
      break;
  }
  if (!selfTest_) return;
  if (const auto* p = lt::alert_cast<lt::dht_pkt_alert>(a)) {
    const std::string ip = p->node.address().to_string();
    if (p->direction == lt::dht_pkt_alert::outgoing)
      reachability_.noteOutgoing(ip);
    else if (isDhtQuery(p->pkt_buf()))
      noteReachabilityChange(reachability_.noteIncoming(ip, "DHT query"));
  } else if (const auto* c = lt::alert_cast<lt::peer_connect_alert>(a)) {
    if (c->direction == lt::peer_connect_alert::direction_t::out)
      reachability_.noteOutgoing(c->endpoint.address().to_string());
  } else if (const auto* in = lt::alert_cast<lt::incoming_connection_alert>(a)) {
    const bool tcp = in->socket_type == lt::socket_type_t::tcp;
    noteReachabilityChange(reachability_.noteIncoming(in->endpoint.address().to_string(),
                                                      tcp ? "incoming TCP connection" : "incoming connection", tcp));
  }
}

void NetworkMonitor::onPortMapped(int externalPort, bool tcp, const std::string& method) {
  const std::string line = "Port mapping via " + method + ": external " + (tcp ? "TCP" : "UDP") + " port " +
                           std::to_string(externalPort) + " forwards to us";
  if (!reported_.insert(line).second) return;  // renewals repeat the alert
  lines_.push_back(line);
  if (tcp) mappedTcpPort_ = externalPort;  // peers dial TCP first; the DHT's UDP mapping is alongside
  reachability_.notePortMapped(externalPort, method);
}

void NetworkMonitor::tick(int dhtNodes, Reachability::Clock::time_point now) {
  if (selfTest_) noteReachabilityChange(reachability_.tick(dhtNodes, now));
}

void NetworkMonitor::noteReachabilityChange(bool changed) {
  if (changed) lines_.push_back(reachability_.line());
}

std::vector<std::string> NetworkMonitor::takeLines() {
  std::vector<std::string> out;
  if (listeningChanged_) {
    listeningChanged_ = false;
    std::string line = "Listening on ";
    for (const auto& [key, kinds] : listening_) {
      line += (line.back() == ' ' ? "" : ", ") + key.second + " (";
      for (const auto& kind : kinds) line += (line.back() == '(' ? "" : "+") + kind;
      line += ")";
    }
    out.push_back(line);
  }
  out.insert(out.end(), lines_.begin(), lines_.end());
  lines_.clear();
  return out;
}

std::vector<std::string> NetworkMonitor::listening() const {
  std::vector<std::string> out;
  for (const auto& entry : listening_) out.push_back(entry.first.second);
  return out;
}

int NetworkMonitor::externalPort() const { return mappedTcpPort_ ? mappedTcpPort_ : listenPort_; }

std::string NetworkMonitor::external() const {
  if (externalIp_.empty()) return {};
  return endpointText(lt::make_address(externalIp_), externalPort());
}

std::string NetworkMonitor::summary() const {
  std::string s;
  if (selfTest_) s = Reachability::stateName(reachability_.state());
  if (!external().empty()) s += (s.empty() ? "" : " · ") + std::string("external ") + external();
  const auto addresses = listening();
  if (!addresses.empty()) s += (s.empty() ? "" : " · ") + std::string("listening on ") + addresses.front();
  return s;
}

}  // namespace es::p2p
