#include "core/store/ledger.h"

#include "core/store/migrations.h"
#include "core/store/sqlite_db.h"

namespace es::store {
namespace {

// Runs one query and turns each row into a T; the error names the query's purpose and the file.
template <typename T, typename... Args>
Expected<std::vector<T>> rowsOf(Db& db, const char* what, const char* sql, T (*convert)(const Row&),
                                const Args&... args) {
  std::vector<T> rows;
  auto status = db.query(
      sql, [&](const Row& row) { rows.push_back(convert(row)); }, args...);
  if (!status)
    return makeError("Cannot read " + std::string(what) + " from ledger \"" + db.path() + "\": " + status.error());
  return rows;
}

PeerRow peerFrom(const Row& row) {
  return {row.text(0), row.text(1), row.integer(2), row.integer(3), row.integer(4) != 0, row.text(5)};
}

}  // namespace

Expected<std::unique_ptr<LedgerReader>> LedgerReader::open(const std::string& dbPath) {
  auto db = Db::open(dbPath, SQLITE_OPEN_READONLY);
  if (!db) return makeError(db.error());
  // No schema version limit: a reader only selects columns that every version has.
  if (auto identity = checkIdentity(*db, std::nullopt); !identity) return makeError(identity.error());
  return std::unique_ptr<LedgerReader>(new LedgerReader(std::make_unique<Db>(std::move(*db))));
}

LedgerReader::LedgerReader(std::unique_ptr<Db> db) : db_(std::move(db)) {}

LedgerReader::~LedgerReader() = default;

Expected<std::vector<MetricRow>> LedgerReader::metrics(const std::string& runId) {
  return rowsOf<MetricRow>(
      *db_, "metrics",
      "SELECT step, round, loss, val_loss, lr, tokens_per_second, at, gpu_utilization, gpu_memory_used_mib, "
      "gpu_temperature_c, gpu_power_w FROM metrics WHERE run_id = ? ORDER BY step",
      [](const Row& row) {
        MetricRow m{row.integer(0), row.integer(1), row.real(2),   row.optionalReal(3),
                    row.real(4),    row.real(5),    row.integer(6)};
        if (!row.isNull(7)) m.gpu = GpuMetric{row.real(7), row.real(8), row.real(9), row.real(10)};
        return m;
      },
      runId);
}

Expected<std::vector<SampleRow>> LedgerReader::samples(const std::string& runId) {
  return rowsOf<SampleRow>(
      *db_, "samples", "SELECT round, prompt, text, val_loss, at FROM samples WHERE run_id = ? ORDER BY round",
      [](const Row& row) {
        return SampleRow{row.integer(0), row.text(1), row.text(2), row.optionalReal(3), row.integer(4)};
      },
      runId);
}

Expected<std::vector<RoundRow>> LedgerReader::rounds(const std::string& runId) {
  return rowsOf<RoundRow>(
      *db_, "rounds",
      "SELECT round, closed_at, peers, contributions, accepted, merged_fingerprint, state_path FROM rounds "
      "WHERE run_id = ? ORDER BY round",
      [](const Row& row) {
        return RoundRow{row.integer(0),
                        row.integer(1),
                        static_cast<int>(row.integer(2)),
                        static_cast<int>(row.integer(3)),
                        static_cast<int>(row.integer(4)),
                        row.text(5),
                        row.text(6)};
      },
      runId);
}

Expected<std::optional<std::int64_t>> LedgerReader::lastCommittedRound(const std::string& runId) {
  std::optional<std::int64_t> last;
  auto status = db_->query(
      "SELECT max(round) FROM rounds WHERE run_id = ?",
      [&](const Row& row) {
        if (!row.isNull(0)) last = row.integer(0);
      },
      runId);
  if (!status) return makeError("Cannot read the last round from ledger \"" + db_->path() + "\": " + status.error());
  return last;
}

Expected<std::vector<ContributionRow>> LedgerReader::contributions(const std::string& runId, std::int64_t round) {
  return rowsOf<ContributionRow>(
      *db_, "contributions",
      "SELECT round, peer_id, info_hash, bytes, verdict, reason FROM contributions "
      "WHERE run_id = ? AND round = ? ORDER BY peer_id",
      [](const Row& row) {
        return ContributionRow{row.integer(0), row.text(1), row.text(2), row.integer(3), row.text(4), row.text(5)};
      },
      runId, round);
}

Expected<std::vector<ClaimRow>> LedgerReader::claims(const std::string& runId, std::int64_t round) {
  return rowsOf<ClaimRow>(
      *db_, "claims", "SELECT peer_id, expert FROM claims WHERE run_id = ? AND round = ? ORDER BY peer_id, expert",
      [](const Row& row) {
        return ClaimRow{row.text(0), static_cast<int>(row.integer(1))};
      },
      runId, round);
}

Expected<std::vector<PeerRow>> LedgerReader::peers(const std::string& runId) {
  return rowsOf<PeerRow>(*db_, "peers",
                         "SELECT peer_id, public_key, first_seen, last_seen, banned, ban_reason FROM peers "
                         "WHERE run_id = ? ORDER BY peer_id",
                         peerFrom, runId);
}

Expected<std::vector<PeerRow>> LedgerReader::bannedPeers(const std::string& runId) {
  return rowsOf<PeerRow>(*db_, "banned peers",
                         "SELECT peer_id, public_key, first_seen, last_seen, banned, ban_reason FROM peers "
                         "WHERE run_id = ? AND banned = 1 ORDER BY peer_id",
                         peerFrom, runId);
}

Expected<std::vector<PeerRow>> LedgerReader::bansSince(const std::string& runId, std::int64_t sinceMs) {
  return rowsOf<PeerRow>(
      *db_, "bans",
      "SELECT peer_id, public_key, first_seen, last_seen, banned, ban_reason, banned_at FROM peers "
      "WHERE run_id = ? AND banned = 1 AND banned_at >= ? ORDER BY peer_id",
      [](const Row& row) {
        PeerRow peer = peerFrom(row);
        peer.bannedAt = row.integer(6);
        return peer;
      },
      runId, sinceMs);
}

Expected<std::vector<std::pair<std::string, std::int64_t>>> LedgerReader::acceptedRounds(const std::string& runId) {
  return rowsOf<std::pair<std::string, std::int64_t>>(
      *db_, "accepted rounds",
      "SELECT peer_id, COUNT(*) FROM contributions WHERE run_id = ? AND verdict = 'accepted' GROUP BY peer_id "
      "ORDER BY peer_id",
      [](const Row& row) {
        return std::pair{row.text(0), row.integer(1)};
      },
      runId);
}

std::string LedgerReader::integrityCheck() {
  std::string report;
  auto status = db_->query("PRAGMA integrity_check",
                           [&](const Row& row) { report.append(report.empty() ? "" : "\n").append(row.text(0)); });
  if (!status) return "integrity_check could not run on \"" + db_->path() + "\": " + status.error();
  return report;
}

}  // namespace es::store
