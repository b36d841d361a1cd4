-- 0002 (PostgreSQL): what several replicas share (DESIGN §12): who is alive, the commands that go to a
-- run's owner, the permits of running calls, and the rate buckets. Times are epoch ms of the database's
-- own clock (`toolgraph_now()`), so replicas whose clocks differ agree on when a lease ends.

CREATE FUNCTION toolgraph_now() RETURNS BIGINT LANGUAGE sql VOLATILE AS $$
  SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT
$$;

-- One row per replica process (an *instance*: a restart is a new one). A run's `owner` is an instance;
-- it owns the run while `lease_until` is ahead of the database's clock.
CREATE TABLE replicas (
  instance    TEXT    PRIMARY KEY,
  name        TEXT    NOT NULL,                  -- --replica-id
  started_at  BIGINT  NOT NULL,
  lease_until BIGINT  NOT NULL,
  renewed_at  BIGINT  NOT NULL
);
CREATE INDEX runs_owner_active ON runs (owner) WHERE status IN ('queued', 'running', 'needs_replan');

-- A command for a run (cancel, review, replan, append, seal) that reached another replica than its
-- owner: the owner applies it and writes the answer.
CREATE TABLE commands (
  id         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run_id     TEXT    NOT NULL,
  target     TEXT    NOT NULL,                   -- the instance that must apply it
  body       TEXT    NOT NULL,                   -- JSON
  status     TEXT    NOT NULL CHECK (status IN ('pending', 'running', 'done')),
  result     TEXT,                               -- JSON
  created_at BIGINT  NOT NULL
);
CREATE INDEX commands_pending ON commands (target, id) WHERE status <> 'done';
CREATE INDEX commands_run ON commands (run_id) WHERE status <> 'done';

-- One row per running call of any replica: what cluster-wide limits and locks count. A permit of an
-- instance whose lease ended counts no more (and is deleted by whoever sees it).
CREATE TABLE permits (
  instance TEXT    NOT NULL,
  run_id   TEXT    NOT NULL,
  call_id  TEXT    NOT NULL,
  tenant   TEXT    NOT NULL,
  tool     TEXT    NOT NULL,
  domain   TEXT,                                 -- lock domain: 'global', 'tenant:<t>', or NULL
  reads    TEXT    NOT NULL,                     -- JSON array of resource keys
  writes   TEXT    NOT NULL,
  since    BIGINT  NOT NULL,
  PRIMARY KEY (run_id, call_id)
);
CREATE INDEX permits_instance ON permits (instance);

-- Token buckets of rate limits, shared: `units` as in core/limits.ts (tokens · perMs).
CREATE TABLE rate_buckets (
  name  TEXT   PRIMARY KEY,
  units BIGINT NOT NULL,
  last  BIGINT NOT NULL
);

-- Like toolgraph_check, for the fence of an append: a replica whose lease ended writes nothing more.
CREATE FUNCTION toolgraph_fence(ok BOOLEAN, message TEXT) RETURNS BOOLEAN LANGUAGE plpgsql AS $$
BEGIN
  IF NOT ok THEN
    RAISE EXCEPTION USING ERRCODE = 'TG002', MESSAGE = message;
  END IF;
  RETURN TRUE;
END $$;

-- Admissions under `maxActiveRunsPerTenant`: a replica that admits a run takes a ticket, under a lock of
-- the tenant, before the run is stored; tickets of runs not stored yet count as active runs, so that
-- replicas admitting at the same instant never pass the cap together. A ticket goes once its run is
-- stored or refused; those of instances whose lease ended count no more.
CREATE TABLE admissions (
  run_id   TEXT   PRIMARY KEY,
  tenant   TEXT   NOT NULL,
  instance TEXT   NOT NULL,
  at       BIGINT NOT NULL
);
CREATE INDEX admissions_tenant ON admissions (tenant);
