#include "core/store/ledger.h"

#include "core/common/safe_quote.h"

#include "core/store/migrations.h"
#include "core/store/sqlite_db.h"

#include <system_error>

namespace es::store {
namespace {

// One GPU column of a step's metric row: NULL when the step carries no reading.
std::optional<double> gpuField(const MetricRow& m, double GpuMetric::*field) {
  return m.gpu ? std::optional<double>((*m.gpu).*field) : std::nullopt;
}

std::string describe(const char* operation, const std::string& runId, const std::string& detail) {
  return std::string(operation) + "(run " + safeQuote(runId) + (detail.empty() ? "" : ", " + detail) + ")";
}

}  // namespace

Expected<std::unique_ptr<Ledger>> Ledger::open(const std::string& dbPath, const std::string& migrationsDir,
                                               ErrorCallback onError) {
  auto migrations = listMigrations(migrationsDir);
  if (!migrations) return makeError(migrations.error());
  auto db = Db::open(dbPath, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (!db) return makeError(db.error());
  if (auto prepared = prepareForWriting(*db, *migrations); !prepared) return makeError(prepared.error());
  try {
    return std::unique_ptr<Ledger>(new Ledger(std::make_unique<Db>(std::move(*db)), std::move(onError)));
  } catch (const std::system_error& error) {  // no thread could be started
    return makeError("Ledger \"" + dbPath + "\": cannot start the writer thread: " + error.what());
  }
}

Ledger::Ledger(std::unique_ptr<Db> db, ErrorCallback onError)
    : db_(std::move(db)), onError_(std::move(onError)), writer_([this] { writerLoop(); }) {}

const std::string& Ledger::path() const { return db_->path(); }  // immutable: safe beside the writer

Ledger::~Ledger() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  writer_.join();  // the writer drains the queue before it leaves
}

void Ledger::enqueue(std::string what, std::function<Status(Db&)> apply) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({std::move(what), std::move(apply)});
    ++queued_;
  }
  wake_.notify_one();
}

Status Ledger::flush() {
  std::unique_lock lock(mutex_);
  const std::int64_t target = queued_;
  drained_.wait(lock, [&] { return stats_.writes >= target; });
  if (!firstError_) return {};
  Status error = makeError(std::move(*firstError_));
  firstError_.reset();
  return error;
}

WriterStats Ledger::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Ledger::writerLoop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything is applied
    // Everything queued while the previous burst was committing goes into this one transaction.
    std::vector<Job> burst;
    burst.swap(queue_);
    lock.unlock();
    const std::vector<std::string> errors = applyBurst(burst);
    if (onError_)
      for (const std::string& error : errors) onError_(error);
    lock.lock();
    stats_.writes += static_cast<std::int64_t>(burst.size());
    stats_.failures += static_cast<std::int64_t>(errors.size());
    if (!errors.empty() && !firstError_) firstError_ = errors.front();
    drained_.notify_all();
  }
}

std::vector<std::string> Ledger::applyBurst(std::vector<Job>& burst) {
  Db& db = *db_;
  auto failedBurst = [&](const std::string& step) {
    std::string message = "Ledger \"" + db.path() + "\": " + step + " failed, " + std::to_string(burst.size()) +
                          " queued writes lost: " + sqlite3_errmsg(db.handle());
    (void)db.exec("ROLLBACK");  // fails harmlessly when there is no transaction
    return std::vector<std::string>(burst.size(), message);
  };
  if (!db.exec("BEGIN IMMEDIATE")) return failedBurst("BEGIN");
  std::vector<std::string> errors;
  for (const Job& job : burst) {
    // A savepoint per job: one bad write (a foreign key, a constraint) is undone alone and the
    // rest of the burst still commits.
    if (!db.run("SAVEPOINT job")) return failedBurst("SAVEPOINT");
    Status status = job.apply(db);
    if (!status) {
      errors.push_back("Ledger \"" + db.path() + "\": " + job.what + " failed: " + status.error());
      (void)db.run("ROLLBACK TO job");
    }
    (void)db.run("RELEASE job");
  }
  if (!db.exec("COMMIT")) return failedBurst("COMMIT");
  std::lock_guard lock(mutex_);
  ++stats_.transactions;
  return errors;
}

void Ledger::joinRun(const std::string& runId, const std::string& name) {
  const std::int64_t at = nowMs();
  // An upsert, not INSERT OR REPLACE: replacing the runs row would cascade-delete the whole run.
  enqueue(describe("joinRun", runId, ""), [=](Db& db) {
    return db.run(
        "INSERT INTO runs(run_id, name, joined_at) VALUES(?, ?, ?) "
        "ON CONFLICT(run_id) DO UPDATE SET name = excluded.name",
        runId, name, at);
  });
}

void Ledger::seePeer(const std::string& runId, const std::string& peerId, const std::string& publicKey,
                     std::int64_t at) {
  enqueue(describe("seePeer", runId, "peer " + safeQuote(peerId)), [=](Db& db) {
    return db.run(
        "INSERT INTO peers(run_id, peer_id, public_key, first_seen, last_seen) VALUES(?, ?, ?, ?, ?) "
        "ON CONFLICT(run_id, peer_id) DO UPDATE SET public_key = excluded.public_key, "
        "first_seen = min(first_seen, excluded.first_seen), last_seen = max(last_seen, excluded.last_seen)",
        runId, peerId, publicKey, at, at);
  });
}

void Ledger::banPeer(const std::string& runId, const std::string& peerId, const std::string& reason) {
  const std::int64_t at = nowMs();
  // A peer can be banned before we saw it (a bad record relayed by someone else): create the row.
  // Banned again: the newest reason and time (its expiry starts over).
  enqueue(describe("banPeer", runId, "peer " + safeQuote(peerId)), [=](Db& db) {
    return db.run(
        "INSERT INTO peers(run_id, peer_id, first_seen, last_seen, banned, ban_reason, banned_at) "
        "VALUES(?, ?, ?, ?, 1, ?, ?) "
        "ON CONFLICT(run_id, peer_id) DO UPDATE SET banned = 1, ban_reason = excluded.ban_reason, "
        "banned_at = excluded.banned_at",
        runId, peerId, at, at, reason, at);
  });
}

void Ledger::addRecord(const std::string& runId, const std::string& peerId, std::int64_t seq, std::int64_t round,
                       const std::string& bytes, std::int64_t at) {
  enqueue(describe("addRecord", runId, "peer " + safeQuote(peerId) + ", seq " + std::to_string(seq)), [=](Db& db) {
    return db.run(
        "INSERT OR REPLACE INTO records(run_id, peer_id, seq, round, bytes, received_at) "
        "VALUES(?, ?, ?, ?, ?, ?)",
        runId, peerId, seq, round, Blob{bytes}, at);
  });
}

void Ledger::addMetric(const std::string& runId, const MetricRow& m) {
  enqueue(describe("addMetric", runId, "step " + std::to_string(m.step)), [=](Db& db) {
    return db.run(
        "INSERT OR REPLACE INTO metrics(run_id, step, round, loss, val_loss, lr, tokens_per_second, at, "
        "gpu_utilization, gpu_memory_used_mib, gpu_temperature_c, gpu_power_w) "
        "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        runId, m.step, m.round, m.loss, m.valLoss, m.lr, m.tokensPerSecond, m.at,
        gpuField(m, &GpuMetric::utilizationPercent), gpuField(m, &GpuMetric::memoryUsedMiB),
        gpuField(m, &GpuMetric::temperatureC), gpuField(m, &GpuMetric::powerWatts));
  });
}

void Ledger::addContribution(const std::string& runId, const ContributionRow& c) {
  const std::string detail = "round " + std::to_string(c.round) + ", peer " + safeQuote(c.peerId);
  enqueue(describe("addContribution", runId, detail), [=](Db& db) {
    return db.run(
        "INSERT OR REPLACE INTO contributions(run_id, round, peer_id, info_hash, bytes, verdict, reason) "
        "VALUES(?, ?, ?, ?, ?, ?, ?)",
        runId, c.round, c.peerId, c.contentId, c.bytes, c.verdict, c.reason);
  });
}

void Ledger::addSample(const std::string& runId, const SampleRow& r) {
  enqueue(describe("addSample", runId, "round " + std::to_string(r.round)), [=](Db& db) {
    return db.run("INSERT OR REPLACE INTO samples(run_id, round, prompt, text, val_loss, at) VALUES(?, ?, ?, ?, ?, ?)",
                  runId, r.round, r.prompt, r.text, r.valLoss, r.at);
  });
}

void Ledger::setClaims(const std::string& runId, std::int64_t round, const std::string& peerId,
                       std::vector<int> experts) {
  const std::string detail = "round " + std::to_string(round) + ", peer " + safeQuote(peerId);
  enqueue(describe("setClaims", runId, detail), [=, experts = std::move(experts)](Db& db) {
    Status status = db.run("DELETE FROM claims WHERE run_id = ? AND round = ? AND peer_id = ?", runId, round, peerId);
    for (std::size_t i = 0; status && i < experts.size(); ++i)
      status = db.run("INSERT OR IGNORE INTO claims(run_id, round, peer_id, expert) VALUES(?, ?, ?, ?)", runId, round,
                      peerId, experts[i]);
    return status;
  });
}

void Ledger::addTransfer(const std::string& runId, const std::string& contentId, const std::string& kind,
                         std::int64_t round, std::int64_t bytes, const std::string& direction, std::int64_t at) {
  enqueue(describe("addTransfer", runId, "content " + safeQuote(contentId) + ", " + direction), [=](Db& db) {
    return db.run(
        "INSERT OR REPLACE INTO transfers(run_id, info_hash, kind, round, bytes, direction, finished_at) "
        "VALUES(?, ?, ?, ?, ?, ?, ?)",
        runId, contentId, kind, round, bytes, direction, at);
  });
}

namespace {
// INSERT OR REPLACE (commit) or INSERT OR IGNORE (ensure) of one rounds row.
std::function<Status(Db&)> insertRound(const char* verb, const std::string& runId, const RoundRow& r) {
  const std::string sql = std::string("INSERT OR ") + verb +
                          " INTO rounds(run_id, round, closed_at, peers, contributions, accepted, merged_fingerprint, "
                          "state_path) VALUES(?, ?, ?, ?, ?, ?, ?, ?)";
  return [=](Db& db) {
    return db.run(sql.c_str(), runId, r.round, r.closedAt, r.peers, r.contributions, r.accepted, r.mergedFingerprint,
                  r.statePath);
  };
}
}  // namespace

void Ledger::commitRound(const std::string& runId, const RoundRow& r) {
  enqueue(describe("commitRound", runId, "round " + std::to_string(r.round)), insertRound("REPLACE", runId, r));
}

void Ledger::ensureRound(const std::string& runId, const RoundRow& r) {
  enqueue(describe("ensureRound", runId, "round " + std::to_string(r.round)), insertRound("IGNORE", runId, r));
}

}  // namespace es::store
