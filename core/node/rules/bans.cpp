#include "core/node/rules/bans.h"

#include "core/store/ledger.h"

namespace es::node {

bool banInForce(const Ban& ban, std::int64_t nowMs) { return nowMs - ban.at < kBanExpiryMs; }

Expected<Bans> loadBans(const std::string& dbPath, const std::string& runId, std::int64_t nowMs) {
  auto reader = store::LedgerReader::open(dbPath);
  if (!reader) return makeError(reader.error());
  // banned_at > now - expiry: the same boundary as banInForce.
  auto rows = (*reader)->bansSince(runId, nowMs - kBanExpiryMs + 1);
  if (!rows) return makeError(rows.error());
  Bans bans;
  for (const auto& row : *rows) bans[PeerId(row.peerId)] = {row.bannedAt, row.banReason};
  return bans;
}

}  // namespace es::node
