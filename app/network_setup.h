// The network half of the client's configuration: what the command line and the donor's saved
// settings (network/*) make of the listen address, the bootstrap nodes, port mapping and the
// public network, as the session's SwarmSettings. This is the one place that decides whether
// public hosts are contacted: only with --public or the saved setting network/public, and never
// for peers on one machine (a loopback --listen), which could not reach them anyway.
#pragma once

#include "app/command_line.h"
#include "core/common/expected.h"
#include "core/settings/client_settings.h"
#include "p2p/swarm_settings.h"

class QSettings;

namespace es::app {

// Fills what the command line left open from the saved settings (the command line wins): the
// public network and port mapping switch on when either says so; without --bootstrap the public
// network bootstraps from saved.bootstrapNodes; without --listen every IPv4 and IPv6 interface on
// saved.listenPort, which a first start chooses at random and saves in `store` (when given).
void applyNetworkSettings(CommandLine& cl, settings::ClientSettings& saved, QSettings* store);

// The session's settings for a command line that went through applyNetworkSettings. `dataDir`
// holds the DHT state (public network only, so a private run never meets a node it was not told
// of). Fails with a clear message for a bad ES_REACHABILITY_GRACE_S.
Expected<p2p::SwarmSettings> swarmSettingsFor(const CommandLine& cl, const QString& dataDir);

}  // namespace es::app
