/**
 * PostgreSQL faults under load, on real processes (DESIGN §7 Faults, §12): what a failover, a proxy
 * restart, an idle-connection reaper or a stalled server does to `toolgraph serve`.
 *
 * - Backends terminated every 700 ms for 8 s (`pg_terminate_backend` from a superuser connection)
 *   while submissions arrive, on one replica and on two: no process exits, every answer is a 201 or a
 *   503 `store_unavailable`, every accepted run ends, and each LISTEN connection listens again.
 * - A frozen server (SIGSTOP of the postmaster and its children) for 8 s under a small load: every
 *   answer is a 201 or a 503 `store_unavailable` within the stated bound (5 s: store/pg-pool.ts),
 *   never a 500 or a 429; `/healthz` says `degraded` within it too; writes resume within 5 s of
 *   SIGCONT; every accepted run ends.
 * - The pool exhausted (admissions and appends wait on locks the test holds, each with a connection of
 *   the pool): the same answers, in bound; back by itself once the locks go.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startCluster, type TestCluster } from '../helpers/replicas.js';

/** The stated bound (docs/operations.md): a request that needs the database answers within it. */
const BOUND_MS = 5000;
/** HTTP and a loaded test machine on top of the bound. */
const SLACK_MS = 700;

const yaml = () => `
tools:
  - name: sleep
    executor: { kind: builtin, name: sleep }
    idempotent: true
  - name: echo
    executor: { kind: builtin, name: echo }
    idempotent: true
limits:
  maxActiveRunsPerTenant: 1000
  tenant: { default: 16 }
`;

const RUN = {
  calls: [
    { id: 's', tool: 'sleep', args: { ms: 100 } },
    { id: 'e', tool: 'echo', args: { after: '${s.output}' } },
  ],
};

interface Answer {
  status: number;
  code: string | undefined;
  ms: number;
  sentAt: number;
  replica: number;
  id: string | undefined;
}

/** Sends a submission every `everyMs` to the replicas in turn until `stop()`; collects the answers. */
function load(c: TestCluster, everyMs: number): { answers: Answer[]; stop(): Promise<void> } {
  const answers: Answer[] = [];
  const pending: Promise<void>[] = [];
  let n = 0;
  const timer = setInterval(() => {
    const replica = n++ % c.replicas.length;
    const child = c.replicas[replica];
    if (!child) return;
    const sentAt = Date.now();
    pending.push(
      fetch(`${child.url}/v1/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(RUN),
        signal: AbortSignal.timeout(30_000),
      }).then(
        async (res) => {
          const body = (await res.json().catch(() => ({}))) as { id?: string; error?: { code?: string } };
          answers.push({ status: res.status, code: body.error?.code, ms: Date.now() - sentAt, sentAt, replica, id: body.id });
        },
        (err: Error) => {
          answers.push({ status: -1, code: err.message, ms: Date.now() - sentAt, sentAt, replica, id: undefined });
        },
      ),
    );
  }, everyMs);
  return {
    answers,
    async stop() {
      clearInterval(timer);
      await Promise.all(pending);
    },
  };
}

/** Terminates every backend of `db` but the killer's own, every `everyMs` for `forMs`; how many it ended. */
async function terminateLoop(pgc: TestPostgres, db: string, everyMs: number, forMs: number): Promise<number> {
  const killer = new pg.Client({ connectionString: pgc.url() });
  killer.on('error', () => {});
  await killer.connect();
  let ended = 0;
  try {
    const until = Date.now() + forMs;
    while (Date.now() < until) {
      const r = await killer.query<{ ok: boolean }>(
        'SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
        [db],
      );
      ended += r.rows.filter((x) => x.ok).length;
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  } finally {
    await killer.end();
  }
  return ended;
}

function dbName(url: string): string {
  return new URL(url).pathname.slice(1);
}

/** One line of figures for the log: answers by status, and the slowest (ms). */
function figures(what: string, answers: readonly Answer[]): void {
  const by = new Map<number, number>();
  for (const a of answers) by.set(a.status, (by.get(a.status) ?? 0) + 1);
  const slowest = Math.max(0, ...answers.map((a) => a.ms));
  console.info(`${what}: ${[...by].map(([s, n]) => `${n}×${s}`).join(', ')}; slowest ${slowest} ms`);
}

/** Every answer a 201 or a 503 store_unavailable; no process exited; every accepted run ended. */
async function expectSound(c: TestCluster, answers: readonly Answer[]): Promise<string[]> {
  const odd = answers.filter((a) => !(a.status === 201 || (a.status === 503 && a.code === 'store_unavailable')));
  expect(odd, JSON.stringify(odd.slice(0, 5))).toEqual([]);
  for (const [i, r] of c.replicas.entries())
    expect(r?.proc.exitCode ?? null, `replica ${i} exited: ${r?.output().slice(-2000)}`).toBe(null);
  const accepted = answers.filter((a) => a.status === 201).map((a) => a.id as string);
  for (const id of accepted) {
    const run = await c.ended(0, id, 60_000);
    expect(run.status, `${id}: ${JSON.stringify(run.diagnostics)}`).toBe('succeeded');
  }
  return accepted;
}

/** Polls until a submission to each replica is a 201; how long that took (ms). */
async function writesBack(c: TestCluster, timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  for (const [i] of c.replicas.entries()) {
    for (;;) {
      const r = await c.request(i, 'POST', '/v1/runs', RUN, 10_000).catch(() => ({ status: -1, body: undefined }));
      if (r.status === 201) break;
      if (Date.now() - t0 > timeoutMs) return Date.now() - t0;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return Date.now() - t0;
}

/** Whether replica `i` listens for notifications again within `timeoutMs` (its `/healthz`). */
async function listening(c: TestCluster, i: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await c.request(i, 'GET', '/healthz', undefined, 5000).catch(() => undefined);
    if (r?.body?.cluster?.listening === true) return true;
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('PostgreSQL faults under load', () => {
  let pgc: TestPostgres;
  beforeAll(async () => {
    pgc = await startPostgres();
  }, 60_000);
  afterAll(async () => {
    await pgc?.stop();
  });

  for (const replicas of [1, 2]) {
    it(`backends terminated every 700 ms for 8 s, ${replicas} replica(s): nobody exits, 201 or 503, every accepted run ends`, async () => {
      const c = await startCluster(replicas, () => yaml(), { pg: pgc, logLevel: 'warn' });
      try {
        const l = load(c, 60);
        const ended = await terminateLoop(pgc, dbName(c.db), 700, 8000);
        await l.stop();
        figures(`terminated ${ended} backends, ${replicas} replica(s)`, l.answers);
        expect(ended).toBeGreaterThan(10);
        expect(l.answers.filter((a) => a.status === 201).length).toBeGreaterThan(10);
        await expectSound(c, l.answers);
        expect(await writesBack(c, 5000)).toBeLessThan(5000);
        // Each replica's LISTEN connection, terminated too, listens again by itself.
        for (const [i] of c.replicas.entries()) expect(await listening(c, i, 5000)).toBe(true);
      } finally {
        await c.close();
      }
    }, 120_000);
  }

  it('a frozen server for 8 s, two replicas: 201 or 503 within the bound, healthz degraded in bound, back within 5 s of SIGCONT', async () => {
    const c = await startCluster(2, () => yaml(), { pg: pgc, logLevel: 'warn' });
    try {
      const l = load(c, 150);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      pgc.signal('SIGSTOP');
      const frozenAt = Date.now();
      let thawedAt = 0;
      try {
        const t0 = Date.now();
        const health = await fetch(`${c.replicas[0]?.url}/healthz`, { signal: AbortSignal.timeout(20_000) });
        expect(Date.now() - t0).toBeLessThan(BOUND_MS);
        expect(health.status).toBe(503);
        expect(((await health.json()) as { status: string }).status).toBe('degraded');
        await new Promise((resolve) => setTimeout(resolve, 8000 - (Date.now() - frozenAt)));
      } finally {
        pgc.signal('SIGCONT');
        thawedAt = Date.now();
      }
      // Measured from SIGCONT.
      const back = writesBack(c, 5000);
      await l.stop();
      const inFreeze = l.answers.filter((a) => a.sentAt >= frozenAt && a.sentAt < thawedAt);
      figures('sent during the freeze', inFreeze);
      expect(inFreeze.length).toBeGreaterThan(20);
      const slow = inFreeze.filter((a) => a.ms > BOUND_MS + SLACK_MS);
      expect(slow, JSON.stringify(slow.slice(0, 5))).toEqual([]);
      expect(inFreeze.filter((a) => a.status === 503).length).toBeGreaterThan(0);
      const backMs = await back;
      console.info(`writes back ${backMs} ms after SIGCONT`);
      expect(backMs).toBeLessThan(5000);
      await expectSound(c, l.answers);
    } finally {
      pgc.signal('SIGCONT');
      await c.close();
    }
  }, 120_000);

  it('the pool exhausted (every connection waits on a lock): 503 within the bound, then back by itself', async () => {
    const c = await startCluster(1, () => yaml(), { pg: pgc, logLevel: 'warn' });
    const locker = new pg.Client({ connectionString: c.db });
    locker.on('error', () => {});
    await locker.connect();
    try {
      const l = load(c, 100);
      await locker.query('BEGIN');
      // Admissions and appends wait in the server, each holding one of the pool's connections.
      await locker.query('LOCK TABLE events, admissions IN EXCLUSIVE MODE');
      const lockedAt = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 6000));
      await locker.query('COMMIT');
      const freedAt = Date.now();
      // Measured from the locks' release.
      const back = writesBack(c, 5000);
      await l.stop();
      const during = l.answers.filter((a) => a.sentAt >= lockedAt && a.sentAt < freedAt);
      figures('sent while the pool was exhausted', during);
      expect(during.filter((a) => a.status === 503).length).toBeGreaterThan(0);
      const slow = during.filter((a) => a.ms > BOUND_MS + SLACK_MS);
      expect(slow, JSON.stringify(slow.slice(0, 5))).toEqual([]);
      expect(await back).toBeLessThan(5000);
      await expectSound(c, l.answers);
    } finally {
      await locker.end().catch(() => {});
      await c.close();
    }
  }, 120_000);
});
