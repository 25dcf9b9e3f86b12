-- Ledger schema version 1. Applied by core/store/migrations.cpp inside one transaction that also
-- sets PRAGMA user_version = 1 and application_id; never edit a released migration, add NN+1.
-- Times are milliseconds since the epoch. Every per-run table hangs off runs(run_id) so forgetting a run
-- is one DELETE; the writer therefore upserts runs (INSERT OR REPLACE would cascade-delete).

CREATE TABLE schema_migrations (
  version    INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at INTEGER NOT NULL
);

CREATE TABLE runs (
  run_id    TEXT PRIMARY KEY,
  name      TEXT NOT NULL DEFAULT '',
  joined_at INTEGER NOT NULL
);

-- Everyone we have seen in a run; a ban outlives restarts.
CREATE TABLE peers (
  run_id     TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  peer_id    TEXT NOT NULL,
  public_key TEXT NOT NULL DEFAULT '',
  first_seen INTEGER NOT NULL,
  last_seen  INTEGER NOT NULL,
  banned     INTEGER NOT NULL DEFAULT 0 CHECK (banned IN (0, 1)),
  ban_reason TEXT,
  PRIMARY KEY (run_id, peer_id)
);

-- Signed peer records as received (the exact wire bytes, so they can be re-verified and relayed).
CREATE TABLE records (
  run_id      TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  peer_id     TEXT NOT NULL,
  seq         INTEGER NOT NULL,
  round       INTEGER NOT NULL,
  bytes       BLOB NOT NULL,
  received_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, peer_id, seq)
);

-- One row per merged round; its presence is what "round committed" means.
CREATE TABLE rounds (
  run_id             TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  round              INTEGER NOT NULL,
  closed_at          INTEGER NOT NULL,
  peers              INTEGER NOT NULL,
  contributions      INTEGER NOT NULL,
  accepted           INTEGER NOT NULL,
  merged_fingerprint TEXT NOT NULL,
  state_path         TEXT NOT NULL,
  PRIMARY KEY (run_id, round)
);

CREATE TABLE contributions (
  run_id    TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  round     INTEGER NOT NULL,
  peer_id   TEXT NOT NULL,
  info_hash TEXT NOT NULL,
  bytes     INTEGER NOT NULL,
  verdict   TEXT NOT NULL,
  reason    TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run_id, round, peer_id)
);

CREATE TABLE metrics (
  run_id            TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  step              INTEGER NOT NULL,
  round             INTEGER NOT NULL,
  loss              REAL NOT NULL,
  val_loss          REAL,  -- NULL on steps without an evaluation
  lr                REAL NOT NULL,
  tokens_per_second REAL NOT NULL,
  at                INTEGER NOT NULL,
  PRIMARY KEY (run_id, step)
);

-- The experts each peer trains in a round.
CREATE TABLE claims (
  run_id  TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  round   INTEGER NOT NULL,
  peer_id TEXT NOT NULL,
  expert  INTEGER NOT NULL,
  PRIMARY KEY (run_id, round, peer_id, expert)
);

CREATE TABLE transfers (
  run_id      TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  info_hash   TEXT NOT NULL,
  kind        TEXT NOT NULL,
  round       INTEGER NOT NULL,
  bytes       INTEGER NOT NULL,
  direction   TEXT NOT NULL,
  finished_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, info_hash, direction)
);
