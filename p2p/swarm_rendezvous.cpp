// Discovery of the run's peers on the DHT (the rendezvous) and its timing.
#include "p2p/swarm_session_impl.h"

#include <QHostAddress>
#include <QTcpSocket>
#include <QTimer>

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
  const bool missing = runPeers == 0 || (book && runPeers + 1 < static_cast<int>(book->size()));
  if (young || missing) {
    session->dht_announce(rendezvous, session->listen_port(), {});
    session->dht_get_peers(rendezvous);
    lastAnnounce = lastLookup = now;
    announceTimer.start(retryMs);
    retryMs = std::min(retryMs * 2, settings.maxRetryMs);
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
  const std::string text = (endpoint.address().is_v6() ? "[" + address + "]" : address) + ":" + std::to_string(endpoint.port());
  if (text == network->external()) return true;
  if (endpoint.port() != session->listen_port()) return false;
  if (endpoint.address().is_loopback()) return true;
  const auto listening = network->listening();
  return std::find(listening.begin(), listening.end(), text) != listening.end();
}

// A run peer that connected to us is dialled back once at its handshake's listen port (p2p/
// record_gossip.h says why): a plain TCP connect, closed as soon as it is established — the SYN
// reaching the peer's listening socket is the whole message, its reachability self-test sees it.
// Not through libtorrent: it never opens a second connection to a peer it is connected to. Once
// per endpoint per 10 minutes, at most kMaxDialedBack remembered and kMaxProbes in flight, and
// only where the self-test runs (same-host swarms have none).
void SwarmSession::Impl::dialBack(const lt::tcp::endpoint& endpoint) {
  constexpr std::size_t kMaxDialedBack = 1024;
  constexpr int kMaxProbes = 16, kProbeTimeoutMs = 10000;
  constexpr auto kAgain = std::chrono::minutes(10);
  if (!network->selfTest() || isSelf(endpoint) || *probesInFlight >= kMaxProbes) return;
  const auto now = std::chrono::steady_clock::now();
  if (const auto it = dialedBack.find(endpoint); it != dialedBack.end() && now - it->second < kAgain) return;
  if (dialedBack.size() >= kMaxDialedBack)
    for (auto it = dialedBack.begin(); it != dialedBack.end();)
      it = now - it->second >= kAgain ? dialedBack.erase(it) : std::next(it);
  if (dialedBack.size() >= kMaxDialedBack) return;  // a thousand peers in 10 minutes: enough proof
  dialedBack[endpoint] = now;
  auto* probe = new QTcpSocket(owner);
  ++*probesInFlight;
  // Captures the counter, not `this`: a probe still open when the session goes is deleted with it.
  auto finish = [probe, inFlight = probesInFlight] {
    if (probe->property("esDone").toBool()) return;
    probe->setProperty("esDone", true);
    --*inFlight;
    probe->abort();
    probe->deleteLater();
  };
  QObject::connect(probe, &QTcpSocket::connected, probe, finish);
  QObject::connect(probe, &QAbstractSocket::errorOccurred, probe, finish);  // refused, unreachable: theirs to learn
  QTimer::singleShot(kProbeTimeoutMs, probe, finish);
  probe->connectToHost(QHostAddress(QString::fromStdString(endpoint.address().to_string())), endpoint.port());
}

}  // namespace es::p2p
