-- Ledger schema version 3: what the merged model writes for the run's fixed prompt, after each
-- validation round (issue 17 item 4): the window's Model tab shows how it improved round by round.
-- Text is the model's own output (bytes decoded as UTF-8 by the reader, bounded by the writer).
CREATE TABLE samples (
  run_id   TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
  round    INTEGER NOT NULL,
  prompt   TEXT NOT NULL,
  text     TEXT NOT NULL,
  val_loss REAL,
  at       INTEGER NOT NULL,
  PRIMARY KEY (run_id, round)
);
