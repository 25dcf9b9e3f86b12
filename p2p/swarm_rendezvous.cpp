// Discovery of the run's peers on the DHT (the rendezvous) and its timing.
#include "p2p/swarm_session_impl.h"

#include <QHostAddress>

#include <algorithm>

namespace es::p2p {

using Clock = std::chrono::steady_clock;

// Discovery. Every run peer seeds the run torrent, and a seed's own DHT lookups ask for non-seeds
// only (BEP33 "noseed"), so the torrent's announces never find the other run peers. We announce
// and look up ourselves, without the seed flag, under the run's rendezvous key (the truncated v2
// info-hash), and connect whatever the DHT returns to the run torrent. Timing: SwarmSettings
// (fast with back-off while young or short of peers, then libtorrent's own intervals) — DHT nodes
// ban an IP that queries them more than 5 times a second.
void SwarmSession::Impl::announceRun() {
  if (!runHandle.is_valid()) return;
  refreshRunPeers();
  using std::chrono::milliseconds;
  const auto now = Clock::now();
  const bool young = now - joinedAt < std::chrono::seconds(30);
  const bool knownMissing = book && runPeers + 1 < static_cast<int>(book->size());
  if (young || runPeers == 0 || knownMissing) {
    session->dht_announce(rendezvous, session->listen_port(), {});
    session->dht_get_peers(rendezvous);
    lastAnnounce = lastLookup = now;
    retryMs = std::min(retryMs, knownMissing ? settings.knownPeersMaxRetryMs : settings.maxRetryMs);
    announceTimer.start(retryMs);
    retryMs = std::min(retryMs * 2, knownMissing ? settings.knownPeersMaxRetryMs : settings.maxRetryMs);
    return;
  }
  retryMs = settings.firstRetryMs;  // a later shortage starts fast again
  if (now - lastLookup >= milliseconds(settings.steadyLookupMs)) {
    session->dht_get_peers(rendezvous);
    lastLookup = now;
  }
  if (now - lastAnnounce >= milliseconds(settings.steadyAnnounceMs)) {
    session->dht_announce(rendezvous, session->listen_port(), {});
    lastAnnounce = now;
  }
  announceTimer.start(settings.firstRetryMs);  // only looks: a shortage is noticed within this
}

void SwarmSession::Impl::refreshRunPeers() {
  if (!runHandle.is_valid()) return;
  const int peers = runHandle.status().num_peers;
  if (peers == runPeers) return;
  runPeers = peers;
  counters.runPeers = runPeers;
  Q_EMIT owner->runPeersChanged(runPeers);
}

// The DHT returns our own announcement too: connecting to it only costs a "connected to
// ourselves" round trip (or a hairpin timeout behind a NAT).
bool SwarmSession::Impl::isSelf(const lt::tcp::endpoint& endpoint) const {
  const std::string address = endpoint.address().to_string();
  const std::string text =
      (endpoint.address().is_v6() ? "[" + address + "]" : address) + ":" + std::to_string(endpoint.port());
  if (text == network->external()) return true;
  if (endpoint.port() != session->listen_port()) return false;
  if (endpoint.address().is_loopback()) return true;
  const auto listening = network->listening();
  return std::find(listening.begin(), listening.end(), text) != listening.end();
}

// Each run peer we are connected to is probed at its handshake's listen port (p2p/dial_back.h),
// only where the self-test runs (same-host swarms have none).
void SwarmSession::Impl::dialBack(const lt::tcp::endpoint& endpoint) {
  if (!network->selfTest() || isSelf(endpoint)) return;
  dialBacks->request(QHostAddress(QString::fromStdString(endpoint.address().to_string())), endpoint.port());
}

}  // namespace es::p2p
