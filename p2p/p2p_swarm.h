// The node's Swarm interface (core/node/swarm.h) over a SwarmSession: announcements become
// signed records, contributions become checkpoint swarms, claims come from p2p/leases.h.
#pragma once

#include "core/node/swarm.h"
#include "p2p/identity.h"
#include "p2p/swarm_session.h"

namespace es::p2p {

class P2pSwarm : public node::Swarm {
 public:
  P2pSwarm(SwarmSession& session, const Identity& identity);

  void setEvents(node::SwarmEvents events) override;
  std::string selfId() const override { return selfId_; }
  std::string runId() const override { return session_.runId(); }
  Status announce(const node::Announcement& announcement) override;
  std::vector<node::SwarmPeer> peers() const override;
  Expected<std::string> publish(const std::string& path) override { return session_.publishFile(path); }
  Status fetch(const std::string& contentId, const std::string& dir) override { return session_.fetch(contentId, dir); }
  void retire(const std::string& contentId, bool deleteFile) override { session_.retire(contentId, deleteFile); }
  std::vector<int> chooseClaims(std::int64_t round, int nExperts, int count) const override;
  int connections() const override { return session_.counters().runPeers; }
  node::SwarmTraffic traffic() const override;

 private:
  SwarmSession& session_;
  PublicKey key_;
  std::string selfId_;
  std::int64_t lastSeq_ = 0;
  QMetaObject::Connection connections_[3];
};

}  // namespace es::p2p
