#include "core/store/migrations.h"

#include "core/common/atomic_file.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>

namespace es::store {
namespace {

namespace fs = std::filesystem;

// "NN-name.sql" → NN; nullopt for anything else.
std::optional<int> versionOf(const std::string& name) {
  const auto dash = name.find('-');
  if (dash == 0 || dash == std::string::npos || name.size() < 4 || name.compare(name.size() - 4, 4, ".sql") != 0)
    return std::nullopt;
  if (!std::all_of(name.begin(), name.begin() + dash,
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return std::nullopt;
  if (dash > 6) return std::nullopt;  // keeps std::stoi in range; nobody writes a millionth migration
  return std::stoi(name.substr(0, dash));
}

std::string hex(std::int64_t value) {
  char text[32];
  // application_id is a signed 32-bit header field; show it as the 32 bits it is.
  std::snprintf(text, sizeof text, "0x%08x", static_cast<unsigned>(static_cast<std::uint32_t>(value)));
  return text;
}

Status setPragma(Db& db, const std::string& pragma) {
  auto status = db.exec("PRAGMA " + pragma);
  if (!status) return makeError(db.failure("Cannot set PRAGMA " + pragma + " on ledger"));
  return {};
}

Status apply(Db& db, const Migration& migration) {
  const std::string failed = "Ledger \"" + db.path() + "\": migration " + std::to_string(migration.version) + " (" +
                             migration.path + ") failed: ";
  auto sql = readWholeFile(migration.path);
  if (!sql) return makeError(failed + sql.error());
  // IMMEDIATE takes the write lock first, so two processes opening a fresh ledger at once cannot
  // both apply the same migration; the loser sees the new user_version below and skips it.
  if (auto begun = db.exec("BEGIN IMMEDIATE"); !begun) return makeError(failed + begun.error());
  auto current = db.integer("PRAGMA user_version");
  if (current && *current >= migration.version) return db.exec("ROLLBACK");
  Status status = current ? db.exec(*sql) : Status(makeError(current.error()));
  // A file that commits on its own would make the version bump below a separate transaction.
  if (status && sqlite3_get_autocommit(db.handle()) != 0)
    return makeError(failed + "the file must not end the transaction (no BEGIN/COMMIT in migrations)");
  // Migrations run with foreign keys off (SQLite's recipe for rebuilding a table), so check here.
  if (status) {
    std::string violation;
    status = db.query("PRAGMA foreign_key_check", [&](const Row& row) { violation = row.text(0); });
    if (status && !violation.empty())
      status = makeError("it leaves rows in \"" + violation + "\" without their parent");
  }
  if (status) status = db.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
  if (status) status = db.exec("PRAGMA user_version = " + std::to_string(migration.version));
  if (status)
    status = db.run("INSERT OR REPLACE INTO schema_migrations(version, name, applied_at) VALUES(?, ?, ?)",
                    migration.version, migration.name, nowMs());
  if (status) status = db.exec("COMMIT");
  if (status) return {};
  (void)db.exec("ROLLBACK");  // may fail when SQLite already rolled back; the state is the same
  return makeError(failed + status.error());
}

}  // namespace

std::int64_t nowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

Expected<std::vector<Migration>> listMigrations(const std::string& dir) {
  std::vector<Migration> migrations;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (it->path().extension() != ".sql") continue;
    auto version = versionOf(name);
    if (!version) return makeError("Migration \"" + it->path().string() + "\" is not named NN-name.sql");
    migrations.push_back({*version, name, it->path().string()});
  }
  if (error) return makeError("Cannot list migrations in \"" + dir + "\": " + error.message());
  std::sort(migrations.begin(), migrations.end(),
            [](const Migration& a, const Migration& b) { return a.version < b.version; });
  if (migrations.empty()) return makeError("No migrations (NN-name.sql) in \"" + dir + "\"");
  for (std::size_t i = 0; i < migrations.size(); ++i) {
    if (migrations[i].version != static_cast<int>(i) + 1)
      return makeError("Migrations in \"" + dir + "\" must be numbered 1, 2, 3… without gaps or repeats; found \"" +
                       migrations[i].name + "\" at position " + std::to_string(i + 1));
  }
  return migrations;
}

Status checkIdentity(Db& db, std::optional<std::int64_t> newestKnown) {
  if (auto set = setPragma(db, "busy_timeout = 5000"); !set) return set;
  // The first read of the header: this is where "file is not a database" shows up.
  auto applicationId = db.integer("PRAGMA application_id");
  if (!applicationId) return makeError(db.failure("Cannot open ledger"));
  auto version = db.integer("PRAGMA user_version");
  auto objects = db.integer("SELECT count(*) FROM sqlite_master");
  if (!version || !objects) return makeError(db.failure("Cannot open ledger"));
  const std::string ledger = "Ledger \"" + db.path() + "\"";
  if (*applicationId != kApplicationId && *applicationId != 0)
    return makeError(ledger + " belongs to another application (application_id " + hex(*applicationId) +
                     ", ExpertSwarm uses " + hex(kApplicationId) + ")");
  if (*applicationId == 0 && (*version != 0 || *objects != 0))
    return makeError(ledger + " is an SQLite database of another application (no ExpertSwarm application_id)");
  if (newestKnown && *version > *newestKnown)
    return makeError(ledger + " was created by a newer ExpertSwarm (schema version " + std::to_string(*version) +
                     ", this build knows up to " + std::to_string(*newestKnown) + ")");
  return {};
}

Status prepareForWriting(Db& db, const std::vector<Migration>& migrations) {
  if (auto identity = checkIdentity(db, migrations.back().version); !identity) return identity;
  // Only now, with the file known to be ours, does anything get written.
  std::optional<std::string> mode;
  auto status = db.query("PRAGMA journal_mode = WAL", [&](const Row& row) { mode = row.text(0); });
  if (!status) return makeError(db.failure("Cannot switch ledger to WAL mode"));
  if (mode != "wal")
    return makeError("Ledger \"" + db.path() + "\" cannot use WAL mode (journal_mode stays \"" + mode.value_or("") +
                     "\"); is it on a network file system?");
  // FULL: a committed round must survive power loss, and the ledger is small enough to afford it.
  if (auto set = setPragma(db, "synchronous = FULL"); !set) return set;
  auto version = db.integer("PRAGMA user_version");
  if (!version) return makeError(db.failure("Cannot read the schema version of ledger"));
  for (const Migration& migration : migrations) {
    if (migration.version <= *version) continue;
    if (auto applied = apply(db, migration); !applied) return applied;
  }
  return setPragma(db, "foreign_keys = ON");
}

}  // namespace es::store
