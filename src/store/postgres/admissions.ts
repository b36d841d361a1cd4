/**
 * The SQL of `maxActiveRunsPerTenant` across replicas (DESIGN §12; cluster/admissions.ts): a ticket per
 * run admitted and not stored yet, taken under an advisory lock of its tenant only, so admissions of
 * different tenants never wait on each other. The count stops at the cap: the tenant's active runs are
 * read from the index on (tenant, status) at most `cap` of them, so an admission costs the same however
 * many runs the tenant has. The SQL is in migration 0007's functions: one round trip per ticket.
 */
import type pg from 'pg';

/**
 * Takes a ticket for `runId` if `tenant` has fewer than `cap` active runs (tickets of live instances
 * included): one round trip, the tenant's lock held only while the function runs, the commit not waiting
 * for the log flush (migration 0007 says why that is safe).
 */
export async function takeTicket(pool: pg.Pool, t: { tenant: string; runId: string; cap: number; instance: string }): Promise<boolean> {
  const r = await pool.query<{ ok: boolean }>('SELECT toolgraph_take_ticket($1, $2, $3, $4) AS ok', [t.tenant, t.runId, t.cap, t.instance]);
  return r.rows[0]?.ok === true;
}

/** Gives tickets back (one round trip; its commit does not wait for the flush: a lost drop is harmless). */
export async function dropTickets(pool: pg.Pool, runIds: readonly string[]): Promise<void> {
  if (runIds.length === 0) return;
  await pool.query('SELECT toolgraph_drop_tickets($1::text[])', [runIds]);
}
