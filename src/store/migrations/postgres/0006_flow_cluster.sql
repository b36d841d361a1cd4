-- 0006 (PostgreSQL): flow control across replicas, exact (DESIGN §4, §12): one run per key, and priority.
--
-- A submission with a `concurrencyKey` takes a claim of its (tenant, key) in one transaction under an
-- advisory lock of the pair (store/postgres/run-keys.ts), after reading the claims before it; so two
-- submissions of one key on two replicas are taken one after the other, and the later one sees the
-- earlier even before its run is stored. `seq` is the order of the key's runs: a run held by `queue`
-- starts once every claim before its own has ended. A claim counts while its run is queued or running,
-- or, not stored yet, while its instance's lease lasts; the others are deleted by the next claim of the key.
CREATE TABLE run_key_claims (
  run_id   TEXT   PRIMARY KEY,
  tenant   TEXT   NOT NULL,
  key      TEXT   NOT NULL,
  seq      BIGINT GENERATED ALWAYS AS IDENTITY,
  instance TEXT   NOT NULL,
  at       BIGINT NOT NULL  -- the database's clock, ms (toolgraph_now())
);
CREATE INDEX run_key_claims_key ON run_key_claims (tenant, key, seq);

-- Priority across replicas (DESIGN §4, §12; cluster/permit-priority.ts): the most urgent call that waits
-- for a counter, on any replica, as JSON (its run, call, priority, when its run became ready, until when
-- the mark holds). A less urgent call is granted only if the counter has room for it and for this one.
ALTER TABLE permit_counts ADD COLUMN waiter TEXT;
