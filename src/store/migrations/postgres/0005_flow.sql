-- 0005 (PostgreSQL): flow control across replicas (DESIGN §4, §12).
--
-- Keyed limits are counters like any other (`permit_counts`, keys `key:<tool><US><K>` and
-- `each:<pattern><US><K>`); a permit keeps the expanded key of its tool's `concurrency.per`, so that
-- `GET /v1/limits` can say which keys are busy.
ALTER TABLE permits ADD COLUMN per_key TEXT;

-- Backpressure: a tool (key '') or one keyed group of it (key K) that answered 429, or 503 with
-- Retry-After, starts no call on any replica until `until` (the database's clock, ms). A later pause
-- of the same tool and key only ever moves `until` later. Ended pauses are swept with idle permit rows.
CREATE TABLE tool_pauses (
  tool   TEXT    NOT NULL,
  key    TEXT    NOT NULL DEFAULT '',
  until  BIGINT  NOT NULL,
  status INTEGER,
  PRIMARY KEY (tool, key)
);
