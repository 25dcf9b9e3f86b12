// The run torrent's links to the run's peers, and getting them back after they dropped.
//
// Every run peer seeds the run torrent, and libtorrent never dials a peer it knows as a seed
// while its own copy is complete (peer_list::is_connect_candidate: `p.seed && m_finished`). Once
// a link between two run peers drops (a cut uplink, libtorrent's 120 s peer_timeout), neither
// side dials the other again: only a restart or an endpoint new to the peer list would. A peer
// behind a NAT that maps nothing cannot be dialled at all, so it stayed unlinked: the netlab's
// 200 s cut, after which records came back only through the DHT's BEP44 polls and a repair's
// contributions got no bytes for 30 s.
//
// RunLinks remembers the endpoints we dial ourselves (our outgoing links, and uTP ones: a uTP
// peer sends from its listening port) and says when to relink: forget the run torrent's peer
// list (torrent_handle::clear_peers: the only way to drop libtorrent's seed flag) and dial them
// all again. Clearing drops every link of the torrent and every dial in progress, so it is done
// only when each link we hold is one we dial ourselves (the peer of an incoming link would not
// dial us back: we are a seed to it too), no dial is under way, and while we hold records of more
// run peers than we are linked to. Transfers dial the
// remembered endpoints too (SwarmSession::Impl::dialTargets): a download is not finished, so
// libtorrent dials them, and content flows before the run torrent is linked again.
#pragma once

#include <libtorrent/socket.hpp>

#include <chrono>
#include <map>
#include <set>
#include <vector>

namespace es::p2p {

struct RunLinksTiming {
  // A lost link is relinked at once, then after `firstRelink`, doubling up to `maxRelink` while
  // any stays lost: a peer that left the run costs a relink a minute until it is forgotten, and
  // each relink drops our other links for a round trip (records are sent again on the new
  // handshake; transfers are other torrents, untouched). With no link left (a cut) a relink
  // costs nothing, and the interval stays at most `unlinkedRelink`: the restore is noticed
  // within it.
  std::chrono::milliseconds firstRelink{3000};
  std::chrono::milliseconds maxRelink{60000};
  std::chrono::milliseconds unlinkedRelink{5000};
  // An endpoint not linked for this long is forgotten (a peer that left the run).
  std::chrono::milliseconds memory{std::chrono::minutes(10)};
  std::size_t maxRemembered = 64;  // bounded, whatever the peer list holds
};

class RunLinks {
 public:
  using Clock = std::chrono::steady_clock;
  using Endpoint = lt::tcp::endpoint;
  using Timing = RunLinksTiming;

  explicit RunLinks(Timing timing = Timing()) : timing_(timing), backoff_(timing.firstRelink) {}

  // The endpoints we dial ourselves that are linked now: remembered, the lost ones counted.
  void note(const std::vector<Endpoint>& dialable, Clock::time_point now);
  // True when the caller should relink now (clear the run torrent's peers, dial targets()):
  // something is lost, clearing loses nothing we cannot get back (`clearable`: every link we hold
  // is one we dial, and no dial is in progress), we know of peers we are not linked to
  // (`peersMissing`), and the back-off allows it.
  bool relinkDue(bool clearable, bool peersMissing, Clock::time_point now);
  // What to dial: every remembered endpoint, linked or lost.
  std::vector<Endpoint> targets() const;
  std::vector<Endpoint> lost() const;

 private:
  Timing timing_;
  std::map<Endpoint, Clock::time_point> lastLinked_;  // remembered endpoint → when last seen linked
  std::set<Endpoint> linked_;
  std::chrono::milliseconds backoff_;
  Clock::time_point nextRelink_{};
};

}  // namespace es::p2p
