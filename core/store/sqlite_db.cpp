#include "core/store/sqlite_db.h"

namespace es::store {

std::optional<double> Row::optionalReal(int col) const {
  if (isNull(col)) return std::nullopt;
  return real(col);
}

std::string Row::text(int col) const {
  const auto* data = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  if (data == nullptr) return {};
  return std::string(data, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
}

Expected<Db> Db::open(const std::string& path, int flags) {
  sqlite3* handle = nullptr;
  // sqlite3_open_v2 returns a handle even when it fails; it carries the message and must be closed.
  const int rc = sqlite3_open_v2(path.c_str(), &handle, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message =
        "Cannot open ledger \"" + path + "\": " + (handle != nullptr ? sqlite3_errmsg(handle) : sqlite3_errstr(rc));
    sqlite3_close(handle);
    return makeError(std::move(message));
  }
  sqlite3_extended_result_codes(handle, 1);
  return Db(handle, path);
}

Db::Db(Db&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      path_(std::move(other.path_)),
      statements_(std::move(other.statements_)) {}

Db& Db::operator=(Db&& other) noexcept {
  if (this != &other) {
    close();
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
    statements_ = std::move(other.statements_);
  }
  return *this;
}

Db::~Db() { close(); }

void Db::close() {
  // Unfinalized statements would keep the connection (and its WAL) open as a zombie.
  for (auto& entry : statements_) sqlite3_finalize(entry.second);
  statements_.clear();
  if (db_ != nullptr) sqlite3_close(db_);
  db_ = nullptr;
}

std::string Db::failure(std::string_view what) const {
  return std::string(what) + " \"" + path_ + "\": " + sqlite3_errmsg(db_);
}

Status Db::exec(const std::string& sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) == SQLITE_OK) return {};
  std::string error = message != nullptr ? message : sqlite3_errmsg(db_);
  sqlite3_free(message);
  return makeError(std::move(error));
}

Expected<sqlite3_stmt*> Db::prepare(const char* sql) {
  auto found = statements_.find(sql);
  if (found != statements_.end()) {
    sqlite3_reset(found->second);
    sqlite3_clear_bindings(found->second);
    return found->second;
  }
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK)
    return makeError(std::string("preparing \"") + sql + "\": " + sqlite3_errmsg(db_));
  statements_.emplace(sql, stmt);
  return stmt;
}

Status Db::stepAll(sqlite3_stmt* stmt, const std::function<void(const Row&)>& onRow) {
  for (;;) {
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
      onRow(Row(stmt));
      continue;
    }
    // Reset now so a cached statement holds no read transaction open between calls.
    std::string error = rc == SQLITE_DONE ? "" : sqlite3_errmsg(db_);
    sqlite3_reset(stmt);
    if (rc == SQLITE_DONE) return {};
    return makeError(std::move(error));
  }
}

Expected<std::int64_t> Db::integer(const char* sql) {
  std::optional<std::int64_t> value;
  auto status = query(sql, [&](const Row& row) { value = row.integer(0); });
  if (!status) return makeError(status.error());
  if (!value) return makeError(std::string("\"") + sql + "\" returned no row");
  return *value;
}

void Db::bind(sqlite3_stmt* stmt, int index, std::int64_t value) { sqlite3_bind_int64(stmt, index, value); }

void Db::bind(sqlite3_stmt* stmt, int index, double value) { sqlite3_bind_double(stmt, index, value); }

void Db::bind(sqlite3_stmt* stmt, int index, const std::optional<double>& value) {
  if (value)
    sqlite3_bind_double(stmt, index, *value);
  else
    sqlite3_bind_null(stmt, index);
}

void Db::bind(sqlite3_stmt* stmt, int index, const std::string& value) {
  sqlite3_bind_text(stmt, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
}

void Db::bind(sqlite3_stmt* stmt, int index, Blob value) {
  // An empty string_view may have a null data(), which SQLite would store as NULL, not as x''.
  if (value.bytes.empty())
    sqlite3_bind_zeroblob(stmt, index, 0);
  else
    sqlite3_bind_blob64(stmt, index, value.bytes.data(), value.bytes.size(), SQLITE_TRANSIENT);
}

}  // namespace es::store
