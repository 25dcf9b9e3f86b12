// Specification of the SQLite ledger (es_store): opening and migrating safely, refusing files that
// are not ours, batched idempotent writes from one writer thread, readers beside it, and surviving
// SIGKILL at any moment with a contiguous history of committed rounds.
#include "core/common/atomic_file.h"
#include "core/store/ledger.h"
#include "core/store/migrations.h"
#include "core/store/sqlite_db.h"

#include <QTemporaryDir>
#include <QTest>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

using es::store::Db;
using es::store::Ledger;
using es::store::LedgerReader;

namespace {

const std::string kMigrations = std::string(ES_SHARE_DIR) + "/sql";
const std::string kRun = "run-1";

// The message of a failed result, "" for a successful one (QVERIFY2 evaluates it either way).
template <typename Result>
const char* why(const Result& result) {
  return result.ok() ? "" : result.error().c_str();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Direct access for inspecting and tampering, behind the ledger's back.
Db rawOpen(const std::string& path) {
  auto db = Db::open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (!db) qFatal("%s", why(db));
  return std::move(db).value();
}

std::int64_t integerOf(Db& db, const char* sql) {
  auto value = db.integer(sql);
  if (!value) qFatal("%s: %s", sql, why(value));
  return *value;
}

std::string textOf(Db& db, const char* sql) {
  std::string text;
  if (!db.query(sql, [&](const es::store::Row& row) { text = row.text(0); })) qFatal("%s failed", sql);
  return text;
}

std::string copyFirstMigration(const QTemporaryDir& dir) {
  const std::string migrations = dir.filePath("sql").toStdString();
  std::filesystem::create_directories(migrations);
  std::filesystem::copy_file(kMigrations + "/01-initial.sql", migrations + "/01-initial.sql");
  return migrations;
}

es::store::RoundRow roundRow(std::int64_t round) {
  return {round, 1000 + round, 3, 3, 2, "fp-" + std::to_string(round), "state/" + std::to_string(round)};
}

constexpr const char* kWriterFlag = "--write-rounds-until-killed";

// The crash child (this binary run with kWriterFlag): records rounds (three contributions, claims, metrics, then the
// round) as fast as it can until it is killed. Flushes after every other round so bursts hold one or two rounds.
[[noreturn]] void writeRoundsUntilKilled(const std::string& path) {
  auto ledger = Ledger::open(path, kMigrations);
  auto reader = ledger ? LedgerReader::open(path) : es::makeError("not opened");
  auto last = reader ? (*reader)->lastCommittedRound(kRun) : es::makeError("no reader");
  if (!last) _exit(2);
  Ledger& writer = **ledger;
  writer.joinRun(kRun, "crash test");
  for (std::int64_t round = last->value_or(0) + 1;; ++round) {
    for (int peer = 0; peer < 3; ++peer) {
      const std::string id = "peer-" + std::to_string(peer);
      writer.addContribution(kRun, {round, id, "hash-" + std::to_string(round), 4096, "accepted", ""});
      writer.setClaims(kRun, round, id, {peer, peer + 3});
      writer.addMetric(kRun, {round * 3 + peer, round, 2.5, std::nullopt, 3e-4, 1000, round});
    }
    writer.commitRound(kRun, roundRow(round));
    if (round % 2 == 0 && !writer.flush()) _exit(3);
  }
}

}  // namespace

class StoreTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void freshLedgerHasEveryTableTheNewestVersionOurApplicationIdAndWal() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    auto ledger = Ledger::open(path, kMigrations);
    QVERIFY2(ledger.ok(), why(ledger));
    auto migrations = es::store::listMigrations(kMigrations);
    QVERIFY2(migrations.ok(), why(migrations));

    Db db = rawOpen(path);
    for (const char* table : {"runs", "peers", "records", "rounds", "contributions", "metrics", "claims", "transfers",
                              "schema_migrations"}) {
      const std::string sql =
          std::string("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '") + table + "'";
      QVERIFY2(integerOf(db, sql.c_str()) == 1, table);
    }
    QCOMPARE(integerOf(db, "PRAGMA user_version"), static_cast<std::int64_t>(migrations->back().version));
    QCOMPARE(integerOf(db, "PRAGMA application_id"), es::store::kApplicationId);
    QCOMPARE(textOf(db, "PRAGMA journal_mode"), std::string("wal"));
    QCOMPARE(integerOf(db, "SELECT count(*) FROM schema_migrations"), static_cast<std::int64_t>(migrations->size()));
  }

  void reopeningAppliesNoMigrationTwiceAndKeepsTheData() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    for (int open = 0; open < 3; ++open) {
      auto ledger = Ledger::open(path, kMigrations);
      QVERIFY2(ledger.ok(), why(ledger));
      (*ledger)->joinRun(kRun, "default");
      (*ledger)->commitRound(kRun, roundRow(open + 1));
      QVERIFY((*ledger)->flush().ok());
    }
    Db db = rawOpen(path);
    const auto migrations = es::store::listMigrations(kMigrations);
    QVERIFY(migrations.ok());
    QCOMPARE(integerOf(db, "SELECT count(*) FROM schema_migrations"), static_cast<std::int64_t>(migrations->size()));
    QCOMPARE(integerOf(db, "SELECT count(*) FROM rounds"), std::int64_t{3});
  }

  void ledgerFromANewerVersionIsRefused() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    QVERIFY(Ledger::open(path, kMigrations).ok());
    {
      Db db = rawOpen(path);
      QVERIFY(db.exec("PRAGMA user_version = 99").ok());
    }
    auto ledger = Ledger::open(path, kMigrations);
    QVERIFY(!ledger.ok());
    QVERIFY2(contains(ledger.error(), "created by a newer ExpertSwarm") && contains(ledger.error(), path), why(ledger));
    Db db = rawOpen(path);
    QCOMPARE(integerOf(db, "PRAGMA user_version"), std::int64_t{99});
  }

  void databaseOfAnotherApplicationIsRefusedAndLeftAlone() {
    QTemporaryDir dir;
    const std::string foreign = dir.filePath("foreign.db").toStdString();
    const std::string anonymous = dir.filePath("anonymous.db").toStdString();
    QVERIFY(rawOpen(foreign).exec("PRAGMA application_id = 305419896; CREATE TABLE t(x)").ok());
    QVERIFY(rawOpen(anonymous).exec("CREATE TABLE t(x)").ok());

    for (const std::string& path : {foreign, anonymous}) {
      auto ledger = Ledger::open(path, kMigrations);
      QVERIFY(!ledger.ok());
      QVERIFY2(contains(ledger.error(), "another application") && contains(ledger.error(), path), why(ledger));
      auto reader = LedgerReader::open(path);
      QVERIFY(!reader.ok());
      Db db = rawOpen(path);
      QCOMPARE(integerOf(db, "SELECT count(*) FROM sqlite_master"), std::int64_t{1});
      QCOMPARE(integerOf(db, "PRAGMA user_version"), std::int64_t{0});
    }
    auto ledger = Ledger::open(foreign, kMigrations);
    QVERIFY2(contains(ledger.error(), "0x12345678"), why(ledger));
  }

  void fileThatIsNotADatabaseIsRefusedAndLeftUntouched() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("notes.txt").toStdString();
    std::string text;
    for (int i = 0; i < 100; ++i) text += "These are my notes, not a database. Line " + std::to_string(i) + "\n";
    QVERIFY(es::writeFileAtomically(path, text).ok());

    auto ledger = Ledger::open(path, kMigrations);
    QVERIFY(!ledger.ok());
    QVERIFY2(contains(ledger.error(), "not a database") && contains(ledger.error(), path), why(ledger));
    QVERIFY(!LedgerReader::open(path).ok());
    QCOMPARE(es::readWholeFile(path).value(), text);
    QVERIFY(!std::filesystem::exists(path + "-wal"));
  }

  void missingDirectoryOrMigrationsGiveErrorsNamingThePath() {
    QTemporaryDir dir;
    auto noDir = Ledger::open("/nonexistent/dir/expertswarm.db", kMigrations);
    QVERIFY2(!noDir.ok() && contains(noDir.error(), "/nonexistent/dir/expertswarm.db"), why(noDir));
    const std::string empty = dir.filePath("empty").toStdString();
    std::filesystem::create_directories(empty);
    auto noMigrations = Ledger::open(dir.filePath("a.db").toStdString(), empty);
    QVERIFY2(!noMigrations.ok() && contains(noMigrations.error(), empty), why(noMigrations));

    const std::string gap = copyFirstMigration(dir);
    QVERIFY(es::writeFileAtomically(gap + "/03-skipped-two.sql", std::string("SELECT 1;")).ok());
    auto withGap = es::store::listMigrations(gap);
    QVERIFY2(!withGap.ok() && contains(withGap.error(), "03-skipped-two.sql"), why(withGap));
  }

  void newMigrationUpgradesAnExistingLedgerAndKeepsItsRows() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    const std::string migrations = copyFirstMigration(dir);
    {
      auto ledger = Ledger::open(path, migrations);
      QVERIFY2(ledger.ok(), why(ledger));
      (*ledger)->joinRun(kRun, "default");
      (*ledger)->commitRound(kRun, roundRow(1));
      (*ledger)->commitRound(kRun, roundRow(2));
    }
    QVERIFY(es::writeFileAtomically(migrations + "/02-test.sql",
                                    std::string("ALTER TABLE rounds ADD COLUMN note TEXT NOT NULL DEFAULT 'none';"))
                .ok());
    auto ledger = Ledger::open(path, migrations);
    QVERIFY2(ledger.ok(), why(ledger));

    Db db = rawOpen(path);
    QCOMPARE(integerOf(db, "PRAGMA user_version"), std::int64_t{2});
    QCOMPARE(textOf(db, "SELECT group_concat(note) FROM rounds"), std::string("none,none"));
    QCOMPARE(textOf(db, "SELECT group_concat(name) FROM schema_migrations"), std::string("01-initial.sql,02-test.sql"));
    auto reader = LedgerReader::open(path);
    QVERIFY2(reader.ok(), why(reader));
    QCOMPARE((*reader)->rounds(kRun)->size(), std::size_t{2});
  }

  void failingMigrationKeepsThePreviousVersionAndNamesTheFile() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    const std::string migrations = copyFirstMigration(dir);
    QVERIFY(Ledger::open(path, migrations).ok());
    // The first statement succeeds, the second does not: the first must be undone with it.
    const std::string broken = migrations + "/02-broken.sql";
    QVERIFY(es::writeFileAtomically(broken, std::string("ALTER TABLE rounds ADD COLUMN note TEXT;\nCREATE TABL oops;"))
                .ok());

    auto ledger = Ledger::open(path, migrations);
    QVERIFY(!ledger.ok());
    QVERIFY2(contains(ledger.error(), "migration 2") && contains(ledger.error(), "02-broken.sql") &&
                 contains(ledger.error(), "syntax error"),
             why(ledger));
    qInfo("%s", why(ledger));
    {
      Db db = rawOpen(path);
      QCOMPARE(integerOf(db, "PRAGMA user_version"), std::int64_t{1});
      QCOMPARE(integerOf(db, "SELECT count(*) FROM pragma_table_info('rounds') WHERE name = 'note'"), std::int64_t{0});
    }
    QVERIFY(es::writeFileAtomically(broken, std::string("ALTER TABLE rounds ADD COLUMN note TEXT;")).ok());
    QVERIFY(Ledger::open(path, migrations).ok());
  }

  void tenThousandWritesAreBatchedIntoFewTransactions() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    auto ledger = Ledger::open(path, kMigrations);
    QVERIFY2(ledger.ok(), why(ledger));
    constexpr int kRows = 10000;

    const auto start = std::chrono::steady_clock::now();
    (*ledger)->joinRun(kRun, "default");
    for (int step = 0; step < kRows; ++step) {
      std::optional<double> valLoss;
      if (step % 100 == 0) valLoss = 3.0 - step * 1e-4;
      (*ledger)->addMetric(kRun, {step, step / 100, 4.0 - step * 1e-4, valLoss, 3e-4, 12345.5, 1700000000000 + step});
    }
    QVERIFY((*ledger)->flush().ok());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const es::store::WriterStats stats = (*ledger)->stats();
    qInfo("%d addMetric calls + flush: %.1f ms, %lld transactions", kRows, ms,
          static_cast<long long>(stats.transactions));
    QCOMPARE(stats.writes, std::int64_t{kRows + 1});
    QVERIFY2(stats.transactions * 10 <= stats.writes, "writes were not batched");

    auto reader = LedgerReader::open(path);
    QVERIFY2(reader.ok(), why(reader));
    auto metrics = (*reader)->metrics(kRun);
    QVERIFY2(metrics.ok(), why(metrics));
    QCOMPARE(metrics->size(), std::size_t{kRows});
    QCOMPARE(metrics->at(4321).step, std::int64_t{4321});
    QCOMPARE(metrics->at(4321).at, std::int64_t{1700000004321});
    QVERIFY(!metrics->at(4321).valLoss.has_value());
    QCOMPARE(metrics->at(4300).valLoss.value(), 3.0 - 4300 * 1e-4);
  }

  // Schema 4 (issue 16): a step's GPU reading is kept when there is one, NULL when there is none.
  void gpuReadingsAreKeptOnlyOnTheStepsThatHaveThem() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    auto ledger = Ledger::open(path, kMigrations);
    QVERIFY2(ledger.ok(), why(ledger));
    (*ledger)->joinRun(kRun, "default");
    es::store::MetricRow withGpu{1, 0, 4.0, std::nullopt, 1e-3, 100, 1};
    withGpu.gpu = es::store::GpuMetric{87, 23456.5, 71, 301.25};
    (*ledger)->addMetric(kRun, withGpu);
    (*ledger)->addMetric(kRun, {2, 0, 3.9, std::nullopt, 1e-3, 100, 2});
    QVERIFY((*ledger)->flush().ok());
    auto metrics = (*LedgerReader::open(path))->metrics(kRun);
    QVERIFY2(metrics.ok(), why(metrics));
    QCOMPARE(metrics->size(), std::size_t{2});
    QVERIFY(metrics->at(0).gpu.has_value());
    QCOMPARE(metrics->at(0).gpu->utilizationPercent, 87.0);
    QCOMPARE(metrics->at(0).gpu->memoryUsedMiB, 23456.5);
    QCOMPARE(metrics->at(0).gpu->temperatureC, 71.0);
    QCOMPARE(metrics->at(0).gpu->powerWatts, 301.25);
    QVERIFY(!metrics->at(1).gpu.has_value());
  }

  void ensureRoundFillsAGapButNeverOverwritesAFullRow() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    auto ledger = Ledger::open(path, kMigrations);
    QVERIFY2(ledger.ok(), why(ledger));
    Ledger& l = **ledger;
    l.joinRun(kRun, "default");
    l.commitRound(kRun, roundRow(1));
    es::store::RoundRow placeholder = roundRow(1);
    placeholder.peers = placeholder.contributions = placeholder.accepted = 0;
    l.ensureRound(kRun, placeholder);  // round 1 is complete: left alone
    placeholder.round = 2;
    l.ensureRound(kRun, placeholder);  // round 2 is missing: recorded
    QVERIFY(l.flush().ok());
    auto reader = LedgerReader::open(path);
    const auto rounds = (*reader)->rounds(kRun);
    QVERIFY(rounds.ok());
    QCOMPARE(rounds->size(), std::size_t{2});
    QCOMPARE(rounds->at(0).peers, roundRow(1).peers);
    QCOMPARE(rounds->at(1).peers, 0);
  }

  void reRecordingARoundReplacesItInsteadOfDuplicating() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    auto ledger = Ledger::open(path, kMigrations);
    QVERIFY2(ledger.ok(), why(ledger));
    // A restarted peer records the same round again, claims changed, joining the run again too.
    for (int attempt = 0; attempt < 2; ++attempt) {
      Ledger& l = **ledger;
      l.joinRun(kRun, "default");
      l.seePeer(kRun, "peer-a", "key-a", 100 + attempt * 50);
      l.addRecord(kRun, "peer-a", 7, 5, std::string("rec\0ord", 7), 200);
      l.addRecord(kRun, "peer-a", 8, 5, "", 200);
      l.addContribution(kRun, {5, "peer-a", "hash-a", 1024, "accepted", ""});
      l.setClaims(kRun, 5, "peer-a", attempt == 0 ? std::vector<int>{1, 2, 3} : std::vector<int>{4, 4});
      l.addTransfer(kRun, "hash-a", "contribution", 5, 1024, "down", 300);
      l.commitRound(kRun, roundRow(5));
      QVERIFY((*ledger)->flush().ok());
    }
    Db db = rawOpen(path);
    QCOMPARE(integerOf(db, "SELECT count(*) FROM runs"), std::int64_t{1});
    QCOMPARE(integerOf(db, "SELECT count(*) FROM rounds"), std::int64_t{1});
    QCOMPARE(integerOf(db, "SELECT count(*) FROM contributions"), std::int64_t{1});
    QCOMPARE(integerOf(db, "SELECT count(*) FROM transfers"), std::int64_t{1});
    QCOMPARE(textOf(db, "SELECT group_concat(expert) FROM claims"), std::string("4"));
    QCOMPARE(integerOf(db, "SELECT sum(length(bytes)) FROM records WHERE typeof(bytes) = 'blob'"), std::int64_t{7});
    auto reader = LedgerReader::open(path);
    auto peers = (*reader)->peers(kRun);
    QCOMPARE(peers->size(), std::size_t{1});
    QCOMPARE(peers->at(0).firstSeen, std::int64_t{100});
    QCOMPARE(peers->at(0).lastSeen, std::int64_t{150});
    QCOMPARE((*reader)->lastCommittedRound(kRun)->value(), std::int64_t{5});
  }

  // Schema 2 gives bans a time (they expire: core/node/rules/bans.h). A ban made under schema 1 takes
  // its row's last_seen; bans made since carry the time banPeer ran.
  void bansGetTheirTimeAndOldOnesTheirLastSeen() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    const std::string migrations = copyFirstMigration(dir);
    QVERIFY(Ledger::open(path, migrations).ok());  // schema 1
    {
      Db db = rawOpen(path);
      QVERIFY(db.exec("INSERT INTO runs(run_id, joined_at) VALUES('run-1', 1)").ok());
      QVERIFY(db.exec("INSERT INTO peers(run_id, peer_id, first_seen, last_seen, banned, ban_reason) "
                      "VALUES('run-1', 'peer-old', 10, 20, 1, 'claimed expert 9')")
                  .ok());
    }
    std::filesystem::copy_file(kMigrations + "/02-ban-time.sql", migrations + "/02-ban-time.sql");
    auto ledger = Ledger::open(path, migrations);
    QVERIFY2(ledger.ok(), why(ledger));
    const std::int64_t before = es::store::nowMs();
    (*ledger)->banPeer(kRun, "peer-new", "norm 3.1e6 > bound 4.2");
    QVERIFY((*ledger)->flush().ok());
    auto reader = LedgerReader::open(path);
    QVERIFY2(reader.ok(), why(reader));
    auto bans = (*reader)->bansSince(kRun, 0);
    QVERIFY2(bans.ok(), why(bans));
    QCOMPARE(bans->size(), std::size_t{2});
    QCOMPARE(bans->at(0).peerId, std::string("peer-new"));
    QVERIFY(bans->at(0).bannedAt >= before);
    QCOMPARE(bans->at(1).bannedAt, std::int64_t{20});
    QCOMPARE(bans->at(1).banReason, std::string("claimed expert 9"));
    QCOMPARE((*reader)->bansSince(kRun, 21)->size(), std::size_t{1});
  }

  void bannedPeerIsVisibleToTheReaderWithItsReason() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    auto ledger = Ledger::open(path, kMigrations);
    QVERIFY2(ledger.ok(), why(ledger));
    (*ledger)->joinRun(kRun, "default");
    (*ledger)->seePeer(kRun, "peer-a", "key-a", 10);
    (*ledger)->seePeer(kRun, "peer-b", "key-b", 20);
    (*ledger)->banPeer(kRun, "peer-b", "norm 3.1e6 > bound 4.2");
    (*ledger)->banPeer(kRun, "peer-never-seen", "relayed a forged record");
    QVERIFY((*ledger)->flush().ok());

    auto reader = LedgerReader::open(path);
    QVERIFY2(reader.ok(), why(reader));
    auto banned = (*reader)->bannedPeers(kRun);
    QVERIFY2(banned.ok(), why(banned));
    QCOMPARE(banned->size(), std::size_t{2});
    QCOMPARE(banned->at(0).peerId, std::string("peer-b"));
    QCOMPARE(banned->at(0).publicKey, std::string("key-b"));
    QCOMPARE(banned->at(0).banReason, std::string("norm 3.1e6 > bound 4.2"));
    QCOMPARE(banned->at(1).banReason, std::string("relayed a forged record"));
    QCOMPARE((*reader)->peers(kRun)->size(), std::size_t{3});
    QVERIFY(!(*reader)->peers(kRun)->at(0).banned);
  }

  void readerSeesCommittedDataWhileTheWriterIsOpen() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    auto ledger = Ledger::open(path, kMigrations);
    QVERIFY2(ledger.ok(), why(ledger));
    auto reader = LedgerReader::open(path);
    QVERIFY2(reader.ok(), why(reader));
    QVERIFY(!(*reader)->lastCommittedRound(kRun)->has_value());

    (*ledger)->joinRun(kRun, "default");
    for (std::int64_t round = 1; round <= 3; ++round) {
      (*ledger)->addContribution(kRun, {round, "peer-a", "hash", 10, "rejected", "norm too large"});
      (*ledger)->commitRound(kRun, roundRow(round));
      QVERIFY((*ledger)->flush().ok());
      QCOMPARE((*reader)->lastCommittedRound(kRun)->value(), round);
      QCOMPARE((*reader)->rounds(kRun)->back().mergedFingerprint, "fp-" + std::to_string(round));
      QCOMPARE((*reader)->contributions(kRun, round)->at(0).reason, std::string("norm too large"));
    }
    QCOMPARE((*reader)->integrityCheck(), std::string("ok"));
    ledger->reset();  // the last close checkpoints and removes the WAL; the reader carries on
    QCOMPARE((*reader)->rounds(kRun)->size(), std::size_t{3});
    auto later = LedgerReader::open(path);
    QVERIFY2(later.ok(), why(later));
    QCOMPARE((*later)->rounds(kRun)->size(), std::size_t{3});
    QCOMPARE((*later)->integrityCheck(), std::string("ok"));
  }

  void failedWriteIsReportedOnceAndTheRestOfItsBurstCommits() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    std::vector<std::string> reported;  // the callback runs on the writer thread; read after flush()
    auto ledger = Ledger::open(path, kMigrations, [&](const std::string& error) { reported.push_back(error); });
    QVERIFY2(ledger.ok(), why(ledger));
    (*ledger)->joinRun(kRun, "default");
    (*ledger)->addMetric(kRun, {1, 0, 4.0, std::nullopt, 1e-3, 100, 1});
    (*ledger)->addMetric("never-joined", {2, 0, 4.0, std::nullopt, 1e-3, 100, 2});
    (*ledger)->addMetric(kRun, {3, 0, 4.0, std::nullopt, 1e-3, 100, 3});
    auto flushed = (*ledger)->flush();
    QVERIFY(!flushed.ok());
    QVERIFY2(contains(flushed.error(), "addMetric(run \"never-joined\", step 2)") &&
                 contains(flushed.error(), "FOREIGN KEY") && contains(flushed.error(), path),
             why(flushed));
    QCOMPARE(reported.size(), std::size_t{1});
    QCOMPARE(reported.front(), flushed.error());
    QVERIFY((*ledger)->flush().ok());
    QCOMPARE((*LedgerReader::open(path))->metrics(kRun)->size(), std::size_t{2});
  }

  void ledgerKilledAtRandomMomentsReopensWithContiguousCommittedRounds() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("expertswarm.db").toStdString();
    const auto seed = static_cast<unsigned>(std::random_device{}());
    qInfo("seed %u", seed);
    std::mt19937 rng(seed);
    for (int kill = 0; kill < 10; ++kill) {
      // A fresh process, not a bare fork(): this one has threads (QTest's watchdog), and a forked
      // child of a multi-threaded process may not start threads or take locks.
      const char* argv[] = {"tst_store", kWriterFlag, path.c_str(), nullptr};
      pid_t child = -1;
      QCOMPARE(posix_spawn(&child, "/proc/self/exe", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 150));
      ::kill(child, SIGKILL);
      int status = 0;
      QCOMPARE(waitpid(child, &status, 0), child);
      QVERIFY2(WIFSIGNALED(status), qPrintable(QString("child exited by itself with %1").arg(WEXITSTATUS(status))));

      auto ledger = Ledger::open(path, kMigrations);
      QVERIFY2(ledger.ok(), why(ledger));
      auto reader = LedgerReader::open(path);
      QVERIFY2(reader.ok(), why(reader));
      QCOMPARE((*reader)->integrityCheck(), std::string("ok"));
      auto rounds = (*reader)->rounds(kRun);
      QVERIFY2(rounds.ok(), why(rounds));
      const auto last = (*reader)->lastCommittedRound(kRun)->value_or(0);
      QCOMPARE(static_cast<std::int64_t>(rounds->size()), last);
      for (std::size_t i = 0; i < rounds->size(); ++i) QCOMPARE(rounds->at(i).round, std::int64_t(i + 1));
      // A committed round never lacks what was queued before it.
      if (last > 0) QCOMPARE((*reader)->contributions(kRun, last)->size(), std::size_t{3});
      qInfo("kill %d: %lld rounds committed", kill + 1, static_cast<long long>(last));
    }
    auto reader = LedgerReader::open(path);
    QVERIFY((*reader)->lastCommittedRound(kRun)->value_or(0) > 0);
  }
};

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == kWriterFlag) writeRoundsUntilKilled(argv[2]);
  StoreTest test;
  QTEST_SET_MAIN_SOURCE_PATH
  return QTest::qExec(&test, argc, argv);
}
#include "tst_store.moc"
