// The run's links: which run peers we dial ourselves, dialling them for every transfer, and
// relinking the run torrent after its links dropped (p2p/run_links.h says why libtorrent alone
// never does).
#include "p2p/swarm_session_impl.h"

#include <libtorrent/peer_info.hpp>

#include <algorithm>

namespace es::p2p {

// Contributions travel between run peers, who already hold connections to each other: every
// transfer (published, fetching or seeding what it fetched) is connected to the run torrent's
// peers directly, so nothing waits for the DHT. Only endpoints we know accept connections: those
// we dialed, and uTP ones (a uTP peer sends from its listening port; through a NAT that is the
// mapping that lets its replies in). A peer that dialed us over TCP dials our transfers itself:
// that is how content reaches and leaves peers behind a NAT. Connecting an endpoint the torrent
// is already connected to does nothing.
namespace {
// A link we dialled ourselves, or a uTP one: the endpoint accepts connections, so we can dial it again.
bool dialled(const lt::peer_info& p) {
  return (p.flags & lt::peer_info::outgoing_connection) || (p.flags & lt::peer_info::utp_socket);
}
}  // namespace

SwarmSession::Impl::RunLinkView SwarmSession::Impl::viewRunLinks() const {
  RunLinkView view;
  if (!runHandle.is_valid()) return view;
  std::vector<lt::peer_info> peers;
  runHandle.get_peer_info(peers);
  for (const auto& p : peers) {
    if (p.flags & (lt::peer_info::connecting | lt::peer_info::handshake)) {  // not a link yet
      ++view.dialling;
      continue;
    }
    ++view.established;
    if (dialled(p) && !isSelf(p.ip)) view.dialable.push_back(p.ip);
    if (!dialled(p)) view.allDialled = false;
  }
  return view;
}

// The run peers linked now and those linked within RunLinks' memory: a transfer started while
// the links are down (a repair right after a cut) dials them itself.
std::vector<lt::tcp::endpoint> SwarmSession::Impl::dialTargets() const {
  auto out = viewRunLinks().dialable;
  for (const auto& e : runLinks.targets())
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
  return out;
}

// Source resume_data: libtorrent's torrent::add_peer sends a DHT ping to the endpoint of every
// other source, and this runs every 3 s for every transfer — dozens of pings a second to the
// same few IPs, over the 5 a second at which their DHT nodes ban us.
void SwarmSession::Impl::connectRunPeers(const lt::torrent_handle& handle,
                                         const std::vector<lt::tcp::endpoint>& runPeers) {
  if (!handle.is_valid()) return;
  for (const auto& endpoint : runPeers) handle.connect_peer(endpoint, lt::peer_info::resume_data);
}

// Every transfer kick (3 s): the links are noted, and when RunLinks says so the run torrent
// forgets its peer list (and with it libtorrent's "a seed: never dial" mark) and dials every
// remembered endpoint again.
void SwarmSession::Impl::relinkRun(std::chrono::steady_clock::time_point now) {
  if (!runHandle.is_valid()) return;
  const auto view = viewRunLinks();
  counters.runLinks = view.established;
  runLinks.note(view.dialable, now);
  if (view.established == 0 && view.dialling == 0) linkPeersMetOnTransfers(now);
  const bool peersMissing = book && view.established + 1 < static_cast<int>(book->size());
  const auto lost = runLinks.lost().size();
  if (lastRelinkLost > 0 && lost == 0) {
    if (settings.log) settings.log("Run links back: linked to every run peer we dialled before");
    lastRelinkLost = 0;
  }
  // Clearing would also end the dials in progress (libtorrent's own, or ours from the last
  // relink: a connect across a NAT takes its time): not while there are any.
  if (!runLinks.relinkDue(view.allDialled && view.dialling == 0, peersMissing, now)) return;
  if (lost != lastRelinkLost && settings.log)
    settings.log("Run links lost: dialling " + std::to_string(lost) + " run peer" + (lost == 1 ? "" : "s") +
                 " again (repeated while they stay unreachable)");
  lastRelinkLost = lost;
  ++counters.relinks;
  runHandle.clear_peers();
  connectRunPeers(runHandle, runLinks.targets());
}

// The run torrent holds no link, yet our transfers dialled peers: everyone who seeds or fetches
// a run's content is a run peer, and the endpoint we dialled accepts connections. So the run
// torrent dials them too, and records flow from the first transfer on. Without it the run's links
// came only from the DHT rendezvous: twice (CI beside clang-tidy, 2026-12-04 and -05) an
// outgoing-only peer fetched a file from a public one after 30 s, yet neither side held a record
// of the other 180 s later — the rendezvous never named them, and nothing else linked the run.
// At most every unlinkedRelink (a dial into a cut fails; the next waits), and only while the run
// torrent has no link and no dial: clearing its peer list (the seed mark, run_links.h) costs nothing then.
void SwarmSession::Impl::linkPeersMetOnTransfers(std::chrono::steady_clock::time_point now) {
  if (now - lastMetLink < RunLinksTiming().unlinkedRelink) return;
  std::vector<lt::tcp::endpoint> met;
  std::vector<lt::peer_info> peers;
  for (const auto& [hash, t] : transfers) {
    if (!t.handle.is_valid()) continue;
    t.handle.get_peer_info(peers);
    for (const auto& p : peers)
      if (dialled(p) && !(p.flags & lt::peer_info::connecting) && !isSelf(p.ip) &&
          std::find(met.begin(), met.end(), p.ip) == met.end())
        met.push_back(p.ip);
  }
  if (met.empty()) return;
  lastMetLink = now;
  if (settings.log)
    settings.log("No link to the run: dialling " + std::to_string(met.size()) + " run peer" +
                 (met.size() == 1 ? "" : "s") + " met on transfers");
  runHandle.clear_peers();
  connectRunPeers(runHandle, met);
}

}  // namespace es::p2p
