// The node's Swarm interface (core/node/swarm.h) over a SwarmSession: announcements become
// signed records, contributions become checkpoint swarms, claims come from p2p/leases.h.
#pragma once

#include "core/node/swarm.h"
#include "p2p/identity.h"
#include "p2p/swarm_session.h"

#include <QTimer>

namespace es::p2p {

class P2pSwarm : public node::Swarm {
 public:
  P2pSwarm(SwarmSession& session, const Identity& identity);
  ~P2pSwarm() override;

  void setEvents(node::SwarmEvents events) override;
  PeerId selfId() const override { return selfId_; }
  std::string runId() const override { return session_.runId(); }
  Status announce(const node::Announcement& announcement) override;
  std::vector<node::SwarmPeer> peers() const override;
  void publish(const std::string& path, Published done) override;
  Status fetch(const ContentId& content, const std::string& dir, const node::FetchLimits& limits) override {
    return session_.fetch(content.str(), dir, limits);
  }
  void retire(const ContentId& content, bool deleteFile) override { session_.retire(content.str(), deleteFile); }
  std::vector<int> chooseClaims(const node::ClaimRequest& request) const override;
  int connections() const override { return session_.counters().runPeers; }
  node::SwarmTraffic traffic() const override;

 private:
  SwarmSession& session_;
  PublicKey key_;
  PeerId selfId_;
  std::int64_t lastSeq_ = 0;
  QMetaObject::Connection connections_[6];
  // One peersChanged per event-loop pass, however many records one gossip drain accepted: the
  // node's handler reads every peer, so one call per record was N² work under a flood.
  QTimer recordsChanged_;
};

}  // namespace es::p2p
