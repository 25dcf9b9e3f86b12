// Bans that outlive a restart (issue 15, item 6): a peer whose contribution was rejected is
// banned for the run with its reason and time, in memory and in the ledger; a starting node
// loads the run's bans still in force. A ban lapses kBanExpiryMs after it was made, in memory as on
// disk.
#pragma once

#include "core/common/expected.h"
#include "core/common/ids.h"

#include <cstdint>
#include <map>
#include <string>

namespace es::node {

// A ban lasts a week. Long enough that a peer sending garbage cannot come back within a run's
// usual life by restarting us, short enough that a peer banned by mistake (a bug, a bad disk) is
// not shut out for good; a hostile peer that returns is banned again on its first bad round.
inline constexpr std::int64_t kBanExpiryMs = 7LL * 24 * 60 * 60 * 1000;

struct Ban {
  std::int64_t at = 0;  // ms since the epoch
  std::string reason;
};
using Bans = std::map<PeerId, Ban>;  // peer → its ban

bool banInForce(const Ban& ban, std::int64_t nowMs);

// The run's bans in force at nowMs, read from the ledger file at dbPath (schema ≥ 2: what
// store::Ledger::open leaves). Expired ones are not loaded.
Expected<Bans> loadBans(const std::string& dbPath, const std::string& runId, std::int64_t nowMs);

}  // namespace es::node
