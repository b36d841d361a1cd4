-- 0001 (PostgreSQL): runs, their event log, tag index and reviews; the same shape as SQLite's 0001,
-- plus `last_seq` (the gapless check of an append, in the same statement) and, for several replicas
-- later, `owner` and `lease_until`. Released migrations are never edited; add a numbered file.

-- One row per run, kept up to date from its events. `created_seq` is the creation order: `list`
-- pages newest first on it.
CREATE TABLE runs (
  id              TEXT    PRIMARY KEY,
  created_seq     BIGINT  GENERATED ALWAYS AS IDENTITY UNIQUE,
  tenant          TEXT    NOT NULL,
  status          TEXT    NOT NULL,
  failure         TEXT    NOT NULL,
  tags            TEXT    NOT NULL DEFAULT '{}',  -- JSON object of strings
  created_at      BIGINT  NOT NULL,                -- epoch ms
  ended_at        BIGINT,                          -- epoch ms, NULL while not ended
  call_count      INTEGER NOT NULL DEFAULT 0,
  idempotency_key TEXT,
  last_seq        INTEGER NOT NULL,                -- the seq of the run's last stored event
  owner           TEXT,                            -- the replica that runs it (several replicas)
  lease_until     BIGINT                           -- epoch ms (several replicas)
);
CREATE UNIQUE INDEX runs_idempotency_key ON runs (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_created ON runs (created_seq);
CREATE INDEX runs_tenant_created ON runs (tenant, created_seq);
CREATE INDEX runs_status_created ON runs (status, created_seq);
CREATE INDEX runs_tenant_status_created ON runs (tenant, status, created_seq);

-- The event log, the truth: gapless `seq` per run from 1.
CREATE TABLE events (
  run_id  TEXT    NOT NULL REFERENCES runs (id),
  seq     INTEGER NOT NULL,
  type    TEXT    NOT NULL,
  call_id TEXT,
  at      BIGINT  NOT NULL,                        -- epoch ms
  data    TEXT    NOT NULL,                        -- JSON object
  PRIMARY KEY (run_id, seq)
);

-- A run's tags once more, one row per pair, for `tag=k:v` filters.
CREATE TABLE run_tags (
  run_id TEXT NOT NULL REFERENCES runs (id),
  key    TEXT NOT NULL,
  value  TEXT NOT NULL,
  PRIMARY KEY (run_id, key)
);
CREATE INDEX run_tags_pair ON run_tags (key, value, run_id);

-- A review is opened by call.awaiting_review (id rev_<runId>_<seq>) and closed by review.decided.
CREATE TABLE reviews (
  id         TEXT    PRIMARY KEY,
  run_id     TEXT    NOT NULL REFERENCES runs (id),
  call_id    TEXT    NOT NULL,
  tenant     TEXT    NOT NULL,
  tool       TEXT    NOT NULL,
  args       TEXT    NOT NULL,                     -- JSON object
  reason     TEXT    NOT NULL,
  status     TEXT    NOT NULL CHECK (status IN ('pending', 'decided')),
  decision   TEXT,
  created_at BIGINT  NOT NULL,                     -- epoch ms
  decided_at BIGINT,
  ord        BIGINT  GENERATED ALWAYS AS IDENTITY  -- the order reviews were opened in
);
CREATE INDEX reviews_status_tenant ON reviews (status, tenant);
CREATE INDEX reviews_run_call ON reviews (run_id, call_id);

-- Fails the statement that calls it (and so rolls back everything it did) when `ok` is false: how an
-- append checks, inside its one statement, that every run's seq went on from where it was.
CREATE FUNCTION toolgraph_check(ok BOOLEAN, message TEXT) RETURNS BOOLEAN LANGUAGE plpgsql AS $$
BEGIN
  IF NOT ok THEN
    RAISE EXCEPTION USING ERRCODE = 'TG001', MESSAGE = message;
  END IF;
  RETURN TRUE;
END $$;
