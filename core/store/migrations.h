// Opening a ledger safely: identity checks before anything is written, connection settings, and the
// schema migrations — numbered files `NN-name.sql` (resources/sql/) applied in order, each in its
// own transaction that also advances `PRAGMA user_version`, so a crash mid-migration leaves the
// database at the previous version. A migration file must not contain BEGIN/COMMIT itself.
#pragma once

#include "core/common/expected.h"
#include "core/store/sqlite_db.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace es::store {

// PRAGMA application_id of every ledger: 'ESW1'. `file(1)` and other tools can tell it apart.
inline constexpr std::int64_t kApplicationId = 0x45535731;

struct Migration {
  int version = 0;
  std::string name;  // file name, e.g. "01-initial.sql"
  std::string path;
};

// The migrations in `dir`, ordered; their numbers must run 1, 2, 3… without gaps or repeats.
Expected<std::vector<Migration>> listMigrations(const std::string& dir);

// Refuses a file that is not a database, one of another application, or (when newestKnown is
// given) one whose schema is newer than this build. Reads only: a refused file is left untouched.
Status checkIdentity(Db& db, std::optional<std::int64_t> newestKnown);

// The writer's connection: identity check, WAL, synchronous=FULL, the pending migrations (with
// foreign keys off, as SQLite advises for table rebuilds; each checks them before it commits),
// then foreign keys on.
Status prepareForWriting(Db& db, const std::vector<Migration>& migrations);

std::int64_t nowMs();

}  // namespace es::store
