#include "p2p/p2p_swarm.h"

#include "p2p/announcement_record.h"
#include "p2p/leases.h"

#include <QDateTime>

#include <algorithm>

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
                                       if (cb) cb(ContentId(hash.toStdString()), path.toStdString());
                                     });
  connections_[2] = QObject::connect(&session_, &SwarmSession::transferFailed, &session_,
                                     [cb = events.fetchFailed](const QString& hash, const QString& reason) {
                                       if (cb) cb(ContentId(hash.toStdString()), reason.toStdString(), false);
                                     });
  connections_[3] = QObject::connect(&session_, &SwarmSession::transferRefused, &session_,
                                     [cb = events.fetchFailed](const QString& hash, const QString& reason) {
                                       if (cb) cb(ContentId(hash.toStdString()), reason.toStdString(), true);
                                     });
  connections_[4] = QObject::connect(&session_, &SwarmSession::keyBanned, &session_,
                                     [cb = events.peerBanned](const QString& id, const QString& reason) {
                                       if (cb) cb(PeerId(id.toStdString()), reason.toStdString());
                                     });
}

Status P2pSwarm::announce(const node::Announcement& a) {
  PeerRecord r = recordOf(a);
  // Milliseconds since the epoch: strictly increasing across restarts too, so a restarted peer's
  // records are never taken for replays of its old ones.
  r.seq = std::max<std::int64_t>(lastSeq_ + 1, QDateTime::currentMSecsSinceEpoch());
  if (auto s = session_.publishRecord(r); !s) return s;
  lastSeq_ = r.seq;
  return {};
}

std::vector<node::SwarmPeer> P2pSwarm::peers() const {
  std::vector<node::SwarmPeer> out;
  for (const auto& r : session_.records().records()) {
    if (r.pk == key_) continue;
    out.push_back({PeerId(peerIdOf(r.pk)), toHex(r.pk), r.seq, announcementOf(r)});
  }
  return out;
}

void P2pSwarm::publish(const std::string& path, Published done) {
  session_.publishFileAsync(path, [done = std::move(done)](Expected<std::string> infoHash) {
    if (!infoHash) return done(makeError(infoHash.error()));
    done(ContentId(std::move(infoHash).value()));
  });
}

std::vector<int> P2pSwarm::chooseClaims(const node::ClaimRequest& request) const {
  const auto records = session_.records().records();
  std::set<PublicKey> excluded;  // the node names peers by id; the leases know keys
  for (const auto& r : records)
    if (request.excluded.count(PeerId(peerIdOf(r.pk)))) excluded.insert(r.pk);
  return p2p::chooseClaims(records, key_, request.round, request.nExperts, request.count, request.leaseRounds,
                           excluded);
}

node::SwarmTraffic P2pSwarm::traffic() const {
  node::SwarmTraffic traffic;
  for (const auto& t : session_.transfers())
    traffic.transfers.push_back(
        {ContentId(t.infoHash), t.totalBytes, t.doneBytes, t.uploadedBytes, t.downloadedBytes, t.peers, t.finished});
  const auto counters = session_.counters();
  traffic.bytesSent = counters.bytesSent;
  traffic.bytesReceived = counters.bytesReceived;
  return traffic;
}

}  // namespace es::p2p
