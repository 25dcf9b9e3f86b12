// SwarmSettings → libtorrent's settings_pack: the one place that knows which libtorrent knobs the
// swarm needs (private to p2p/; docs/ARCHITECTURE.md, "libtorrent notes", says why).
#pragma once

#include "core/common/expected.h"
#include "p2p/swarm_settings.h"

#include <libtorrent/settings_pack.hpp>

namespace es::p2p {

Expected<lt::settings_pack> toSettingsPack(const SwarmSettings& settings);

// "host:port" → (host, port); false for anything else (port 1–65535; 0 allowed when allowZero).
bool splitEndpoint(const std::string& text, std::string& host, int& port, bool allowZero = false);

}  // namespace es::p2p
