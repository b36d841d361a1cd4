-- 0004 (PostgreSQL): permits without a cluster-wide lock (DESIGN §12 "It scales"). An ask locks and
-- reads only the rows of the limits and keys its calls name, in a fixed order (counters by key, then
-- lock nodes by domain and node), so asks for different keys never wait on each other and an ask
-- costs the same however many permits are held elsewhere.
--
-- Upgrading: replicas of an earlier version count permits another way; stop them all before starting
-- this one. The permits they held are dropped here (their instances are gone).

DELETE FROM permits;

-- What each permit took, so that giving it back takes exactly that back: the counter keys and the lock
-- entries (`<domain> <node> <mode>`, mode r, w, ir or iw).
ALTER TABLE permits ADD COLUMN keys  TEXT[] NOT NULL DEFAULT '{}';
ALTER TABLE permits ADD COLUMN locks TEXT[] NOT NULL DEFAULT '{}';
-- Holders of a key or of locks in a domain are read only to explain a refusal or for GET /v1/limits.
CREATE INDEX permits_keys ON permits USING gin (keys);
CREATE INDEX permits_domain ON permits (domain) WHERE domain IS NOT NULL;

-- One row per limit key (`tenant:<t>`, `tool:<t>`, `resource:<key>`; a new kind of limit is new keys):
-- how many running calls count against it, and the capacity the last ask gave it.
CREATE TABLE permit_counts (
  key    TEXT    PRIMARY KEY,
  in_use INTEGER NOT NULL DEFAULT 0,
  cap    INTEGER NOT NULL DEFAULT 0
);

-- Reader–writer locks across runs as multi-granularity locking: a node per resource-key prefix in a
-- lock domain (`global`, `tenant:<t>`); the root is ''. A call that reads (writes) a key counts in `r`
-- (`w`) of the key's node and in `ir` (`iw`) of each ancestor, so a write of `file/repo/src` and a read
-- of `file/repo/src/a.ts` meet on the row of `file/repo/src`.
CREATE TABLE permit_locks (
  domain TEXT    NOT NULL,
  node   TEXT    NOT NULL,
  r      INTEGER NOT NULL DEFAULT 0,
  w      INTEGER NOT NULL DEFAULT 0,
  ir     INTEGER NOT NULL DEFAULT 0,
  iw     INTEGER NOT NULL DEFAULT 0,
  -- The oldest call that waits for this node (`wait_at`) and for one below it (`wait_below`), as JSON
  -- (cluster/permit-waits.ts): younger calls that conflict wait behind it, across replicas.
  wait_at    TEXT,
  wait_below TEXT,
  PRIMARY KEY (domain, node)
);

-- An instance whose lease ended gives its permits back once: whoever notices first.
ALTER TABLE replicas ADD COLUMN permits_freed BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX replicas_unfreed ON replicas (lease_until) WHERE NOT permits_freed;
