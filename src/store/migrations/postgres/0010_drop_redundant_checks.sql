-- What the append statement (store/postgres-append.ts) already ensures, no longer checked again for
-- every row it writes.
--
-- The foreign keys of `events` and `run_tags` to `runs`: the append is the only writer of both tables,
-- and in the same statement it either inserts the run or finds it (the upsert on `runs` whose count
-- `toolgraph_check` compares, which fails the statement for a run not stored), and no statement
-- deletes a run. Each key cost a trigger per row: an index probe and a row lock on `runs` for each of a
-- run's events, about half of the database's work per run.
--
-- `runs_created`: the same index as the one of `created_seq`'s UNIQUE constraint, kept up to date twice.
ALTER TABLE events DROP CONSTRAINT events_run_id_fkey;
ALTER TABLE run_tags DROP CONSTRAINT run_tags_run_id_fkey;
DROP INDEX runs_created;
