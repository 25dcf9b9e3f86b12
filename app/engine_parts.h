// Engine's private parts, shared by engine.cpp, engine_start.cpp and engine_magnet.cpp (not for other files).
#pragma once

#include "app/engine.h"
#include "app/run_setup.h"
#include "app/shard_rotation.h"
#include "core/node/node.h"
#include "core/store/ledger.h"
#include "p2p/identity.h"
#include "p2p/p2p_swarm.h"
#include "p2p/swarm_session.h"

#include <memory>

namespace es::app {

struct Engine::Parts {
  PreparedRun prepared;
  std::unique_ptr<p2p::Identity> identity;
  std::unique_ptr<p2p::SwarmSession> session;
  std::unique_ptr<p2p::P2pSwarm> swarm;
  std::unique_ptr<store::Ledger> ledger;
  std::unique_ptr<node::Node> node;
  std::unique_ptr<ShardRotation> rotation;  // a prepared run held in part (after node: goes first)
  node::NodeConfig config;
};

}  // namespace es::app
