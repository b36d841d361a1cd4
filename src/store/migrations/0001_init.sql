-- 0001: runs, their event log, tag index and reviews. Released migrations are never edited; change the
-- schema with a new numbered file.

-- One row per run, kept up to date from its events. `created_seq` (1, 2, 3…) is the creation order:
-- `list` pages newest first on it.
CREATE TABLE runs (
  id              TEXT    PRIMARY KEY,
  created_seq     INTEGER NOT NULL UNIQUE,
  tenant          TEXT    NOT NULL,
  status          TEXT    NOT NULL,
  failure         TEXT    NOT NULL,
  tags            TEXT    NOT NULL DEFAULT '{}',  -- JSON object of strings
  created_at      INTEGER NOT NULL,                -- epoch ms
  ended_at        INTEGER,                         -- epoch ms, NULL while not ended
  call_count      INTEGER NOT NULL DEFAULT 0,
  idempotency_key TEXT
);
CREATE UNIQUE INDEX runs_idempotency_key ON runs (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_tenant_created ON runs (tenant, created_seq);
CREATE INDEX runs_status_created ON runs (status, created_seq);
CREATE INDEX runs_tenant_status ON runs (tenant, status);

-- The event log, the truth: gapless `seq` per run from 1.
CREATE TABLE events (
  run_id  TEXT    NOT NULL REFERENCES runs (id),
  seq     INTEGER NOT NULL,
  type    TEXT    NOT NULL,
  call_id TEXT,
  at      INTEGER NOT NULL,                       -- epoch ms
  data    TEXT    NOT NULL,                       -- JSON object
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

-- A run's tags once more, one row per pair, for `tag=k:v` filters.
CREATE TABLE run_tags (
  run_id TEXT NOT NULL REFERENCES runs (id),
  key    TEXT NOT NULL,
  value  TEXT NOT NULL,
  PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE INDEX run_tags_pair ON run_tags (key, value, run_id);

-- A review is opened by call.awaiting_review (id rev_<runId>_<seq>) and closed by review.decided.
CREATE TABLE reviews (
  id         TEXT    PRIMARY KEY,
  run_id     TEXT    NOT NULL REFERENCES runs (id),
  call_id    TEXT    NOT NULL,
  tenant     TEXT    NOT NULL,
  tool       TEXT    NOT NULL,
  args       TEXT    NOT NULL,                    -- JSON object
  reason     TEXT    NOT NULL,
  status     TEXT    NOT NULL CHECK (status IN ('pending', 'decided')),
  decision   TEXT,
  created_at INTEGER NOT NULL,                    -- epoch ms
  decided_at INTEGER
);
CREATE INDEX reviews_status_tenant ON reviews (status, tenant);
CREATE INDEX reviews_run_call ON reviews (run_id, call_id);
