// Where this peer sits on the network, learned from the session's alerts: the addresses libtorrent
// listens on, the external address (from DHT nodes and peers, or the router's port mapping) and
// the reachability self-test (p2p/reachability.h). Private to p2p/: SwarmSession::Impl feeds it
// every alert and turns what it reports into log lines and a status-bar summary.
#pragma once

#include "p2p/reachability.h"

#include <libtorrent/alert.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace es::p2p {

class NetworkMonitor {
 public:
  // selfTest: run the reachability test (off for peers on one host, where it means nothing and
  // its DHT packet alerts would only cost CPU).
  NetworkMonitor(bool selfTest, std::chrono::seconds grace);

  // The alert categories handle() needs on top of the swarm's own.
  static lt::alert_category_t alertCategories(bool selfTest);

  void handle(const lt::alert* alert);
  void tick(int dhtNodes, Reachability::Clock::time_point now);
  // The log lines gathered since the last call (a burst of listen alerts makes one line).
  std::vector<std::string> takeLines();

  std::vector<std::string> listening() const;  // "IP:PORT", most reachable first
  std::string external() const;                // "IP:PORT" once learned, else ""
  // The TCP port a stranger dials us at: the router's mapped port, else the listen port (0: none yet).
  int dialPort() const { return externalPort(); }
  bool selfTest() const { return selfTest_; }
  const Reachability& reachability() const { return reachability_; }
  std::string summary() const;  // one line for the window's status bar

 private:
  void onPortMapped(int externalPort, bool tcp, const std::string& method);
  void noteReachabilityChange(bool changed);
  int externalPort() const;

  bool selfTest_;
  Reachability reachability_;
  // (rank, "IP:PORT") → {"TCP", "uTP"}; rank orders the most reachable kind of address first
  std::map<std::pair<int, std::string>, std::set<std::string>> listening_;
  bool listeningChanged_ = false;
  std::string externalIp_;
  int listenPort_ = 0, mappedTcpPort_ = 0;
  std::set<std::string> reported_;  // mapping and error lines already logged (routers repeat them)
  std::vector<std::string> lines_;
};

}  // namespace es::p2p
