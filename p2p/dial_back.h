// The reachability dial-back probe (p2p/record_gossip.h says why it exists): a plain TCP connect
// to a run peer's listen endpoint, closed as soon as it is established — the SYN reaching the
// peer's listening socket is the whole message; the peer's self-test sees it as an incoming TCP
// connection (p2p/reachability.h). Not through libtorrent: it never opens a second connection to
// a peer it is already connected to. Qt only (no libtorrent), so it is unit-tested on loopback.
//
// Bounds: a reached endpoint is probed again after 10 minutes at the earliest; a failed one is
// retried with back-off (base, 2·base, 4·base … 6 tries: a router may install its port mapping
// after the peers first met — the netlab's NAT-PMP peer missed every probe of its first second),
// then left until a new request 10 minutes on. ≤ 16 probes in flight, ≤ 1024 endpoints known.
#pragma once

#include <QHostAddress>
#include <QObject>

#include <chrono>
#include <map>
#include <memory>
#include <utility>

namespace es::p2p {

class DialBackProber {
 public:
  using Clock = std::chrono::steady_clock;
  // Probes are children of `parent` (they die with it); `retryBase` is the first retry's delay.
  explicit DialBackProber(QObject* parent, std::chrono::milliseconds retryBase = std::chrono::seconds(10),
                          int timeoutMs = 10000);

  // A run peer at ip:port (its connection's IP, its handshake's listen port): probe it, unless it
  // was reached lately, a probe is on its way, or a retry is already scheduled.
  void request(const QHostAddress& ip, quint16 port);
  // Probes again every failed endpoint whose retry is due (call every few seconds).
  void retryDue();

  bool reached(const QHostAddress& ip, quint16 port) const;
  int failures(const QHostAddress& ip, quint16 port) const;

 private:
  using Key = std::pair<QString, quint16>;
  struct Target {
    Clock::time_point next{};  // no probe before this
    int failures = 0;
    bool reached = false, inFlight = false;
  };
  struct State {
    std::map<Key, Target> targets;
    int inFlight = 0;
  };
  void probe(const Key& key);

  QObject* parent_;
  std::chrono::milliseconds retryBase_;
  int timeoutMs_;
  std::shared_ptr<State> state_ = std::make_shared<State>();  // shared with the probes' callbacks
};

}  // namespace es::p2p
