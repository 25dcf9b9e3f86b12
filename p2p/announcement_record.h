// The one conversion between what the node announces (core/node/swarm.h, typed ids) and the
// signed record that carries it (p2p/peer_record.h, wire text). The record adds what only the
// swarm layer knows — run, key, seq, free memory, identity work — and carries the loss as
// loss × 10⁴ (bencode has no floats).
#pragma once

#include "core/node/swarm.h"
#include "p2p/peer_record.h"

namespace es::p2p {

PeerRecord recordOf(const node::Announcement& announcement);  // claims sorted; run, pk, seq left empty
node::Announcement announcementOf(const PeerRecord& record);

}  // namespace es::p2p
