// A thin RAII layer over the sqlite3 C API, shared by the ledger's writer, its readers and the
// migrations: one connection, cached prepared statements with typed binds, and error messages that
// name the database file. It is deliberately not a general wrapper; it has what the ledger needs.
// A Db is not thread-safe: each thread that touches the ledger owns its own connection.
#pragma once

#include "core/common/expected.h"

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace es::store {

// Binds as a BLOB; a plain std::string binds as TEXT.
struct Blob {
  std::string_view bytes;
};

// One result row, read by column index.
class Row {
 public:
  explicit Row(sqlite3_stmt* stmt) : stmt_(stmt) {}
  std::int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  bool isNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::optional<double> optionalReal(int col) const;
  std::string text(int col) const;  // NULL reads as ""

 private:
  sqlite3_stmt* stmt_;
};

class Db {
 public:
  // `flags` are sqlite3_open_v2's (SQLITE_OPEN_READONLY, or READWRITE | CREATE).
  static Expected<Db> open(const std::string& path, int flags);

  Db(Db&& other) noexcept;
  Db& operator=(Db&& other) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db();

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

  // Runs one or more statements that return no rows (a migration file, BEGIN, a PRAGMA that sets).
  Status exec(const std::string& sql);

  // Runs one cached statement with the given parameters, stepping it to the end.
  template <typename... Args>
  Status run(const char* sql, const Args&... args) {
    return query(
        sql, [](const Row&) {}, args...);
  }

  // Runs one cached statement, calling onRow for each result row.
  template <typename... Args>
  Status query(const char* sql, const std::function<void(const Row&)>& onRow, const Args&... args) {
    auto stmt = prepare(sql);
    if (!stmt) return makeError(stmt.error());
    int index = 0;
    (bind(*stmt, ++index, args), ...);
    return stepAll(*stmt, onRow);
  }

  // The single integer a query returns (a PRAGMA, a count). A query returning no row is an error.
  Expected<std::int64_t> integer(const char* sql);

  // "<what> \"<path>\": <sqlite's message for the last failure>".
  std::string failure(std::string_view what) const;

 private:
  Db(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Expected<sqlite3_stmt*> prepare(const char* sql);
  Status stepAll(sqlite3_stmt* stmt, const std::function<void(const Row&)>& onRow);
  void close();

  static void bind(sqlite3_stmt* stmt, int index, std::int64_t value);
  static void bind(sqlite3_stmt* stmt, int index, int value) { bind(stmt, index, std::int64_t{value}); }
  static void bind(sqlite3_stmt* stmt, int index, double value);
  static void bind(sqlite3_stmt* stmt, int index, const std::optional<double>& value);
  static void bind(sqlite3_stmt* stmt, int index, const std::string& value);
  static void bind(sqlite3_stmt* stmt, int index, Blob value);

  sqlite3* db_ = nullptr;
  std::string path_;
  // Keyed by the SQL text: the writer runs the same few statements thousands of times per burst.
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
};

}  // namespace es::store
