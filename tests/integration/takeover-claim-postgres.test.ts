/**
 * The takeover claim (store/postgres/takeover.ts, DESIGN §12) on a real PostgreSQL: many replicas
 * claiming a dead instance's runs at once, in batches of one and a few, each run is claimed by exactly
 * one of them, never by a second one after the first committed (under READ COMMITTED a claim that
 * locks a row another replica claimed meanwhile rechecks it on its new version: a recheck through an
 * outer join took it again), and runs of live owners are never claimed.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresStore } from '../../src/store/postgres.js';
import { claimOrphans } from '../../src/store/postgres/takeover.js';
import { openStore } from '../../src/store/select.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

const CLAIMERS = ['a/1', 'b/1', 'c/1', 'd/1'];

describe('claimOrphans on PostgreSQL', () => {
  let pgc: TestPostgres;
  let store: PostgresStore;
  let admin: pg.Pool;

  beforeAll(async () => {
    pgc = await startPostgres();
    const url = await pgc.createDatabase();
    store = (await openStore({ kind: 'postgres', url, from: 'test' }, { poolSize: 12 })) as PostgresStore;
    admin = new pg.Pool({ connectionString: url, max: 2 });
  }, 90_000);

  afterAll(async () => {
    await admin?.end();
    await store?.close();
    await pgc?.stop();
  });

  async function seed(round: number, orphans: number, live: number): Promise<void> {
    await admin.query(
      `INSERT INTO replicas (instance, name, started_at, lease_until, renewed_at)
       SELECT i, split_part(i, '/', 1), toolgraph_now(), toolgraph_now() + 600000, toolgraph_now() FROM unnest($1::text[]) AS i
       ON CONFLICT (instance) DO NOTHING`,
      [[...CLAIMERS, 'live/1']],
    );
    await admin.query(`INSERT INTO replicas (instance, name, started_at, lease_until, renewed_at) VALUES ($1, 'dead', 0, 0, 0)`, [
      `dead/${round}`,
    ]);
    await admin.query(
      `INSERT INTO runs (id, tenant, status, failure, created_at, last_seq, owner)
       SELECT 'r' || $1 || '-' || g, 't', CASE WHEN g % 3 = 0 THEN 'queued' ELSE 'running' END, 'partial', 0, 1,
              CASE WHEN g <= $2::int THEN $3::text ELSE 'live/1' END
       FROM generate_series(1, $2::int + $4::int) AS g`,
      [round, orphans, `dead/${round}`, live],
    );
  }

  for (const batch of [1, 3, 16]) {
    it(`four replicas claiming in batches of ${batch} at once take each orphan exactly once, and no run of a live owner`, async () => {
      const round = batch;
      await seed(round, 400, 50);
      const claimedBy = new Map<string, string[]>();
      await Promise.all(
        CLAIMERS.map(async (me) => {
          for (;;) {
            const ids = await claimOrphans(store.pool, me, batch);
            for (const id of ids) claimedBy.set(id, [...(claimedBy.get(id) ?? []), me]);
            if (ids.length < batch) return;
          }
        }),
      );
      const mine = [...claimedBy.keys()].filter((id) => id.startsWith(`r${round}-`));
      expect(mine).toHaveLength(400);
      expect(mine.filter((id) => claimedBy.get(id)!.length > 1)).toEqual([]);
      const owners = await admin.query<{ owner: string; n: number }>(
        `SELECT owner, count(*)::int AS n FROM runs WHERE id LIKE $1 GROUP BY owner ORDER BY owner`,
        [`r${round}-%`],
      );
      expect(owners.rows.find((r) => r.owner === 'live/1')?.n).toBe(50);
      expect(owners.rows.filter((r) => r.owner.startsWith('dead/'))).toEqual([]);
      // Each claimer holds what it was told it claimed.
      for (const me of CLAIMERS) {
        const told = mine.filter((id) => claimedBy.get(id)![0] === me).length;
        expect(owners.rows.find((r) => r.owner === me)?.n ?? 0).toBe(told);
      }
    }, 60_000);
  }
});
