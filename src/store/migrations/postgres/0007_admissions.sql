-- Admissions in one round trip (DESIGN §12 "It scales"; store/postgres/admissions.ts). The ticket of
-- 0002 was taken in four round trips under the tenant's advisory lock, and the lock was held through the
-- commit's WAL flush: every admission of a tenant queued behind the one before, fsync included. Here the
-- lock, the count and the insert run in one function call, and the commit does not wait for the flush
-- (synchronous_commit off for this transaction only): the ticket is visible to the next admission at
-- once. A ticket lost in a database crash belonged to a submission whose run was not stored yet: the
-- run's insert commits synchronously after it, and a flush of the log writes every record before it,
-- the ticket's included; if the insert never commits, the submission fails and the ticket is moot.
CREATE FUNCTION toolgraph_take_ticket(p_tenant TEXT, p_run_id TEXT, p_cap INTEGER, p_instance TEXT)
RETURNS BOOLEAN LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  n BIGINT;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  PERFORM pg_advisory_xact_lock(1952932196, hashtext(p_tenant)); -- "tgad", as in 0002
  SELECT (SELECT count(*) FROM (SELECT 1 FROM runs WHERE tenant = p_tenant AND status = 'queued' LIMIT p_cap) q)
       + (SELECT count(*) FROM (SELECT 1 FROM runs WHERE tenant = p_tenant AND status = 'running' LIMIT p_cap) r)
       + (SELECT count(*) FROM (SELECT 1 FROM admissions a JOIN replicas p ON p.instance = a.instance
          WHERE a.tenant = p_tenant AND p.lease_until > toolgraph_now()
            AND NOT EXISTS (SELECT 1 FROM runs WHERE id = a.run_id) LIMIT p_cap) a)
    INTO n;
  IF n >= p_cap THEN
    RETURN FALSE;
  END IF;
  INSERT INTO admissions (run_id, tenant, instance, at) VALUES (p_run_id, p_tenant, p_instance, toolgraph_now());
  RETURN TRUE;
END $$;

-- Tickets whose runs are stored or refused, several at once (a replica gives back those of an
-- event-loop turn together): a lost drop is harmless (a ticket whose run exists counts no more, and one
-- of an instance whose lease ended neither), so the commit does not wait for the flush either.
CREATE FUNCTION toolgraph_drop_tickets(p_run_ids TEXT[]) RETURNS VOID LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  DELETE FROM admissions WHERE run_id = ANY(p_run_ids);
END $$;
