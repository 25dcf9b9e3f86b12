// SwarmSession's place on the network: the DHT state it starts from, the addresses it reports and
// the reachability self-test's results (NetworkMonitor does the work; this relays it).
#include "p2p/dht_state.h"
#include "p2p/lt_settings.h"
#include "p2p/swarm_session.h"
#include "p2p/swarm_session_impl.h"

#include <filesystem>

namespace es::p2p {

// The DHT state saved by the last run (a missing file is a first start, not an error).
void loadDhtState(const SwarmSettings& s, lt::session_params& params) {
  if (s.dhtStatePath.empty() || !std::filesystem::exists(s.dhtStatePath)) return;
  auto state = readDhtState(s.dhtStatePath);
  const std::string line =
      state ? "DHT state: " + std::to_string(dhtStateNodes(*state)) + " nodes from \"" + s.dhtStatePath + "\""
            : "Ignoring the saved DHT state \"" + s.dhtStatePath + "\": " + state.error();
  if (s.log) s.log(line);
  if (state) params.dht_state = std::move(*state);
}

std::string SwarmSession::listenEndpoint() const {
  std::string host;
  int port = 0;
  splitEndpoint(impl_->settings.listen.substr(0, impl_->settings.listen.find(',')), host, port, true);
  if (host == "0.0.0.0" || host == "::") {
    const auto addresses = impl_->network->listening();
    if (!addresses.empty()) return addresses.front();
    host = "127.0.0.1";
  }
  return (host.find(':') == std::string::npos ? host : "[" + host + "]") + ":" + std::to_string(listenPort());
}

std::vector<std::string> SwarmSession::listenAddresses() const { return impl_->network->listening(); }
std::string SwarmSession::externalAddress() const { return impl_->network->external(); }
std::string SwarmSession::reachabilityLine() const {
  return impl_->network->selfTest() ? impl_->network->reachability().line() : std::string();
}
std::string SwarmSession::networkSummary() const { return impl_->network->summary(); }

void SwarmSession::Impl::reportNetwork() {
  if (network->selfTest()) {  // the port our handshakes tell run peers to dial us back at
    std::lock_guard lock(hub->mutex);
    hub->dialPort = network->dialPort();
  }
  // BEP 10's "p" only once strangers can dial it (p2p/listen_port_hint.h says why).
  const auto state = network->reachability().state();
  portHint->advertise = !network->selfTest() || state == Reachability::State::Reachable ||
                        state == Reachability::State::ReachableViaPortMapping;
  const auto lines = network->takeLines();
  if (lines.empty()) return;
  if (settings.log)
    for (const auto& line : lines) settings.log(line);
  Q_EMIT owner->networkChanged();
}

}  // namespace es::p2p
