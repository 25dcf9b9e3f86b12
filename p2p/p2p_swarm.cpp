#include "p2p/p2p_swarm.h"

#include "p2p/leases.h"

#include <QDateTime>

#include <algorithm>
#include <cmath>

namespace es::p2p {

P2pSwarm::P2pSwarm(SwarmSession& session, const Identity& identity)
    : session_(session), key_(identity.publicKey()), selfId_(identity.peerId()) {
  recordsChanged_.setSingleShot(true);
  recordsChanged_.setInterval(0);
}

P2pSwarm::~P2pSwarm() {
  for (auto& c : connections_) QObject::disconnect(c);
}

void P2pSwarm::setEvents(node::SwarmEvents events) {
  for (auto& c : connections_) QObject::disconnect(c);
  connections_[0] = QObject::connect(&session_, &SwarmSession::recordAccepted, &session_,
                                     [timer = &recordsChanged_](const PeerRecord&) { timer->start(); });
  connections_[5] = QObject::connect(&recordsChanged_, &QTimer::timeout, &session_, [cb = events.peersChanged] {
    if (cb) cb();
  });
  connections_[1] = QObject::connect(&session_, &SwarmSession::transferFinished, &session_,
                                     [cb = events.fetched](const QString& hash, const QString& path) {
                                       if (cb) cb(hash.toStdString(), path.toStdString());
                                     });
  connections_[2] = QObject::connect(&session_, &SwarmSession::transferFailed, &session_,
                                     [cb = events.fetchFailed](const QString& hash, const QString& reason) {
                                       if (cb) cb(hash.toStdString(), reason.toStdString(), false);
                                     });
  connections_[3] = QObject::connect(&session_, &SwarmSession::transferRefused, &session_,
                                     [cb = events.fetchFailed](const QString& hash, const QString& reason) {
                                       if (cb) cb(hash.toStdString(), reason.toStdString(), true);
                                     });
  connections_[4] = QObject::connect(&session_, &SwarmSession::keyBanned, &session_,
                                     [cb = events.peerBanned](const QString& id, const QString& reason) {
                                       if (cb) cb(id.toStdString(), reason.toStdString());
                                     });
}

Status P2pSwarm::announce(const node::Announcement& a) {
  PeerRecord r;
  // Milliseconds since the epoch: strictly increasing across restarts too, so a restarted peer's
  // records are never taken for replays of its old ones.
  r.seq = std::max<std::int64_t>(lastSeq_ + 1, QDateTime::currentMSecsSinceEpoch());
  r.round = a.round;
  r.claims = a.claims;
  std::sort(r.claims.begin(), r.claims.end());
  r.leaseUntil = a.leaseUntil;
  r.contrib = a.contrib;
  r.snapshot = a.snapshot;
  r.merged = a.merged;
  r.sets = a.sets;
  r.stats.steps = a.steps;
  r.stats.lossE4 = std::llround(a.loss * 1e4);
  r.stats.tokensPerSecond = std::llround(a.tokensPerSecond);
  if (auto s = session_.publishRecord(r); !s) return s;
  lastSeq_ = r.seq;
  return {};
}

std::vector<node::SwarmPeer> P2pSwarm::peers() const {
  std::vector<node::SwarmPeer> out;
  for (const auto& r : session_.records().records()) {
    if (r.pk == key_) continue;
    node::SwarmPeer p;
    p.id = peerIdOf(r.pk);
    p.publicKey = toHex(r.pk);
    p.seq = r.seq;
    p.round = r.round;
    p.claims = r.claims;
    p.leaseUntil = r.leaseUntil;
    p.contrib = r.contrib;
    p.snapshot = r.snapshot;
    p.merged = r.merged;
    p.sets = r.sets;
    p.steps = r.stats.steps;
    p.loss = double(r.stats.lossE4) / 1e4;
    p.tokensPerSecond = double(r.stats.tokensPerSecond);
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<int> P2pSwarm::chooseClaims(const node::ClaimRequest& request) const {
  const auto records = session_.records().records();
  std::set<PublicKey> excluded;  // the node names peers by id; the leases know keys
  for (const auto& r : records)
    if (request.excluded.count(peerIdOf(r.pk))) excluded.insert(r.pk);
  return p2p::chooseClaims(records, key_, request.round, request.nExperts, request.count, request.leaseRounds,
                           excluded);
}

node::SwarmTraffic P2pSwarm::traffic() const {
  node::SwarmTraffic traffic;
  for (const auto& t : session_.transfers())
    traffic.transfers.push_back(
        {t.infoHash, t.totalBytes, t.doneBytes, t.uploadedBytes, t.downloadedBytes, t.peers, t.finished});
  const auto counters = session_.counters();
  traffic.bytesSent = counters.bytesSent;
  traffic.bytesReceived = counters.bytesReceived;
  return traffic;
}

}  // namespace es::p2p
