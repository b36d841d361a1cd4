-- 0003 (PostgreSQL): what each replica's calls wait for, so that `GET /v1/limits` on any replica is
-- cluster-wide (DESIGN §7, §12). Each live replica publishes a compact summary of its waiting calls
-- per limit or lock (at most a few hundred entries of kind, key, domain, count and oldest wait start,
-- as JSON) when it changes; a replica whose lease ended counts no more.
--   waits        JSON: [{ "kind", "key"?, "domain"?, "n", "since" }], `since` on the replica's clock
--   waits_clock  the replica's clock when it wrote `waits`
--   waits_at     the database's clock then (toolgraph_now()): a reader adds the time since, so clocks
--                of replicas that differ do not matter
ALTER TABLE replicas ADD COLUMN waits TEXT NOT NULL DEFAULT '[]';
ALTER TABLE replicas ADD COLUMN waits_clock BIGINT NOT NULL DEFAULT 0;
ALTER TABLE replicas ADD COLUMN waits_at BIGINT NOT NULL DEFAULT 0;
