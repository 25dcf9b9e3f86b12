// The ledger: what this node knows about its runs, kept in one SQLite file (expertswarm.db).
// Ledger is the single writer: one connection and one thread that applies queued writes, a whole
// burst per transaction (thousands of metric rows cost one fsync, not thousands). LedgerReader is
// a read-only connection for the UI and tests; WAL lets it read while the writer writes.
// Plain structs in and out; nothing here throws, and no sqlite or Qt type appears.
#pragma once

#include "core/common/expected.h"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace es::store {

class Db;

// What the GPU was doing at a step (schema version 4); absent on a CPU and on steps not read.
struct GpuMetric {
  double utilizationPercent = 0, memoryUsedMiB = 0, temperatureC = 0, powerWatts = 0;
};

struct MetricRow {
  std::int64_t step = 0, round = 0;
  double loss = 0;
  std::optional<double> valLoss;  // only on steps with an evaluation
  double lr = 0, tokensPerSecond = 0;
  std::int64_t at = 0;             // ms since the epoch
  std::optional<GpuMetric> gpu{};  // {}: an aggregate initialiser may leave it out
};

struct RoundRow {
  std::int64_t round = 0, closedAt = 0;
  int peers = 0, contributions = 0, accepted = 0;
  std::string mergedFingerprint, statePath;
};

struct ContributionRow {
  std::int64_t round = 0;
  std::string peerId, contentId;  // contentId: the info_hash column (a v2 info-hash)
  std::int64_t bytes = 0;
  std::string verdict, reason;
};

// What the merged model of a round wrote for the run's fixed prompt (greedy continuation).
struct SampleRow {
  std::int64_t round = 0;
  std::string prompt, text;  // text: the continuation only
  std::optional<double> valLoss;
  std::int64_t at = 0;  // ms since the epoch
};

struct ClaimRow {
  std::string peerId;
  int expert = 0;
};

struct PeerRow {
  std::string peerId, publicKey;
  std::int64_t firstSeen = 0, lastSeen = 0;
  bool banned = false;
  std::string banReason;
  std::int64_t bannedAt = 0;  // ms since the epoch; filled by LedgerReader::bansSince only
};

struct WriterStats {
  std::int64_t writes = 0;        // jobs applied (failed ones included)
  std::int64_t transactions = 0;  // bursts committed
  std::int64_t failures = 0;
};

class Ledger {
 public:
  // Called on the writer thread with each failed write; it must not call back into the Ledger.
  using ErrorCallback = std::function<void(const std::string& message)>;

  // Opens (creating if needed) the ledger at dbPath and brings its schema up to the newest
  // migration in migrationsDir. Refuses other files, other applications' databases and newer schemas.
  static Expected<std::unique_ptr<Ledger>> open(const std::string& dbPath, const std::string& migrationsDir,
                                                ErrorCallback onError = {});
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;
  ~Ledger();  // applies everything queued, then closes

  // Writes: each queues a job and returns at once; any thread may call them. Re-recording the same
  // key replaces the row, so a restarted peer can record its round again. Every write except
  // joinRun needs the run joined first (foreign keys).
  void joinRun(const std::string& runId, const std::string& name);
  void seePeer(const std::string& runId, const std::string& peerId, const std::string& publicKey, std::int64_t at);
  void banPeer(const std::string& runId, const std::string& peerId, const std::string& reason);
  void addRecord(const std::string& runId, const std::string& peerId, std::int64_t seq, std::int64_t round,
                 const std::string& bytes, std::int64_t at);
  void addMetric(const std::string& runId, const MetricRow& metric);
  void addContribution(const std::string& runId, const ContributionRow& contribution);
  void addSample(const std::string& runId, const SampleRow& sample);
  // Replaces the peer's claims for that round.
  void setClaims(const std::string& runId, std::int64_t round, const std::string& peerId, std::vector<int> experts);
  void addTransfer(const std::string& runId, const std::string& contentId, const std::string& kind, std::int64_t round,
                   std::int64_t bytes, const std::string& direction, std::int64_t at);
  // The durability point of a round: the queue is FIFO and a burst commits whole, so the round row
  // becomes durable together with (or after) everything queued before it — never without it.
  // flush() returning ok means it is on disk.
  void commitRound(const std::string& runId, const RoundRow& round);
  // Records a round only if it is missing (keeps a full row): a peer that crashed between its
  // durable state and the commit re-records the round it resumes from, so rounds stay contiguous.
  void ensureRound(const std::string& runId, const RoundRow& round);

  // Blocks until everything queued so far is committed; returns the first error since the last flush.
  Status flush();

  WriterStats stats() const;
  const std::string& path() const;  // the database file, for a LedgerReader beside this writer

 private:
  struct Job {
    std::string what;  // for error messages: "addMetric(run \"r\", step 5)"
    std::function<Status(Db&)> apply;
  };

  explicit Ledger(std::unique_ptr<Db> db, ErrorCallback onError);
  void enqueue(std::string what, std::function<Status(Db&)> apply);
  void writerLoop();
  std::vector<std::string> applyBurst(std::vector<Job>& burst);

  std::unique_ptr<Db> db_;  // used only by the writer thread once it runs
  ErrorCallback onError_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;     // writer: jobs queued or stopping
  std::condition_variable drained_;  // flush(): a burst was applied
  std::vector<Job> queue_;
  std::int64_t queued_ = 0;  // jobs ever queued
  WriterStats stats_;        // stats_.writes: jobs ever applied
  std::optional<std::string> firstError_;
  bool stopping_ = false;
  std::thread writer_;
};

class LedgerReader {
 public:
  // Read-only connection (SQLITE_OPEN_READONLY). Use one per thread.
  static Expected<std::unique_ptr<LedgerReader>> open(const std::string& dbPath);
  LedgerReader(const LedgerReader&) = delete;
  LedgerReader& operator=(const LedgerReader&) = delete;
  ~LedgerReader();

  // By step. Needs schema version 4 (the GPU columns), which Ledger::open brings any ledger to.
  Expected<std::vector<MetricRow>> metrics(const std::string& runId);
  Expected<std::vector<RoundRow>> rounds(const std::string& runId);  // by round
  Expected<std::optional<std::int64_t>> lastCommittedRound(const std::string& runId);
  Expected<std::vector<SampleRow>> samples(const std::string& runId);  // by round
  Expected<std::vector<ContributionRow>> contributions(const std::string& runId, std::int64_t round);
  Expected<std::vector<ClaimRow>> claims(const std::string& runId, std::int64_t round);  // by peer, expert
  Expected<std::vector<PeerRow>> peers(const std::string& runId);                        // by peer id
  Expected<std::vector<PeerRow>> bannedPeers(const std::string& runId);
  // Per peer id, the rounds in which its contribution was merged ("accepted"), by peer id.
  Expected<std::vector<std::pair<std::string, std::int64_t>>> acceptedRounds(const std::string& runId);
  // The bans made at or after `sinceMs` (ms since the epoch), with their time and reason, by peer
  // id. Needs schema version 2 (peers.banned_at), which Ledger::open brings any ledger to.
  Expected<std::vector<PeerRow>> bansSince(const std::string& runId, std::int64_t sinceMs);
  // "ok", or what PRAGMA integrity_check found (or why it could not run).
  std::string integrityCheck();

 private:
  explicit LedgerReader(std::unique_ptr<Db> db);

  std::unique_ptr<Db> db_;
};

}  // namespace es::store
