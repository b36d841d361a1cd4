/**
 * One suite, every backend (DESIGN §22): the same tests run against the SQLite store, the in-memory
 * store and the PostgreSQL store, each test on a fresh store (SQLite: its own file in a fresh temp
 * folder; PostgreSQL: its own database in a throwaway cluster, tests/helpers/postgres.ts). SQLite alone is also checked for durability across reopening,
 * for migrations running once, and for append throughput (printed, not asserted).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../src/core/events.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { migrate } from '../../src/store/migrate.js';
import { openPostgresStore } from '../../src/store/postgres.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

let cluster: TestPostgres | undefined;
beforeAll(async () => {
  cluster = await startPostgres();
}, 60_000);
afterAll(async () => cluster?.stop());

const BACKENDS: [string, (file: string) => Store | Promise<Store>][] = [
  ['sqlite', (file) => openSqliteStore(file)],
  ['memory', () => createMemoryStore()],
  ['postgres', async () => openPostgresStore({ url: await (cluster as TestPostgres).createDatabase(), poolSize: 4 })],
];

const T0 = Date.UTC(2025, 0, 1);

/** Numbers one run's events as the engine does: seq 1, 2, 3… */
class RunLog {
  seq = 0;
  constructor(readonly runId: string) {}
  ev(type: RunEvent['type'], data: Record<string, unknown> = {}, callId?: string): RunEvent {
    this.seq += 1;
    // Any payload: the store is tested with events the scheduler would never write, too.
    const e = { seq: this.seq, type, runId: this.runId, at: T0 + this.seq * 10, data } as RunEvent;
    if (callId !== undefined) e.callId = callId;
    return e;
  }
  created(opts: { tenant?: string; tags?: Record<string, string>; key?: string; calls?: { id: string; tool: string }[] } = {}): RunEvent {
    const calls = (opts.calls ?? [{ id: 'c1', tool: 'read_log' }]).map((c) => ({ ...c, args: {} }));
    return this.ev('run.created', {
      tenant: opts.tenant ?? 'acme',
      failure: 'partial',
      tags: opts.tags ?? {},
      calls,
      estimates: {},
      ...(opts.key !== undefined ? { idempotencyKey: opts.key } : {}),
    });
  }
}

async function code(fn: () => unknown): Promise<string | undefined> {
  try {
    await fn();
  } catch (err) {
    return (err as { code?: string }).code ?? 'no code';
  }
  return undefined;
}

let dir: string;
let file: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'toolgraph-store-'));
  file = join(dir, 'sub', 'store.db');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe.each(BACKENDS)('store: %s', (_name, open) => {
  let store: Store;
  beforeEach(async () => {
    store = await open(file);
  });
  afterEach(() => store.close());

  /** Creates a run (and optionally ends it) in its own batch; returns its log. */
  async function makeRun(id: string, opts: Parameters<RunLog['created']>[0] & { status?: string } = {}): Promise<RunLog> {
    const log = new RunLog(id);
    const batch = [log.created(opts), log.ev('run.started')];
    if (opts.status) batch.push(log.ev('run.completed', { status: opts.status }));
    await store.append(batch);
    return log;
  }

  it('appends events and reads them back in order, with the run derived from them', async () => {
    const a = new RunLog('run_a');
    const b = new RunLog('run_b');
    await store.append([
      a.created({ tags: { env: 'prod' } }),
      b.created({ tenant: 'zeta' }),
      a.ev('run.started'),
      a.ev('call.ready', {}, 'c1'),
    ]);
    await store.append([a.ev('call.started', { attempt: 1, args: { q: 1 } }, 'c1'), b.ev('run.started')]);
    const events = await store.events('run_a');
    expect(events.map((e) => [e.seq, e.type])).toEqual([
      [1, 'run.created'],
      [2, 'run.started'],
      [3, 'call.ready'],
      [4, 'call.started'],
    ]);
    expect(events[3]).toEqual({
      seq: 4,
      type: 'call.started',
      runId: 'run_a',
      callId: 'c1',
      at: T0 + 40,
      data: { attempt: 1, args: { q: 1 } },
    });
    expect('callId' in (events[1] as RunEvent)).toBe(false);
    expect((await store.events('run_a', 2)).map((e) => e.seq)).toEqual([3, 4]);
    expect((await store.events('run_b')).map((e) => e.seq)).toEqual([1, 2]);
    expect(await store.events('nope')).toEqual([]);

    expect(await store.run('run_a')).toEqual({
      id: 'run_a',
      tenant: 'acme',
      status: 'running',
      failure: 'partial',
      tags: { env: 'prod' },
      createdAt: new Date(T0 + 10).toISOString(),
      endedAt: null,
      callCount: 1,
      idempotencyKey: null,
    });
    await store.append([a.ev('run.completed', { status: 'needs_replan' })]);
    expect(await store.run('run_a')).toMatchObject({ status: 'needs_replan', endedAt: new Date(T0 + 50).toISOString() });
    await store.append([
      a.ev('run.replanned', {
        calls: [
          { id: 'c2', tool: 'fix', args: {} },
          { id: 'c3', tool: 'fix', args: {} },
        ],
        edges: [],
      }),
    ]);
    expect(await store.run('run_a')).toMatchObject({ status: 'running', endedAt: null, callCount: 3 });
    expect(await store.run('nope')).toBeUndefined();
  });

  it('gives back every event data exactly: line feeds, quotes, backslashes, control characters, any Unicode', async () => {
    const strings = [
      'line\nfeed',
      'cr\r\nlf',
      'say "hi"',
      'back\\slash\\"',
      '\u0001\u001f\u007f',
      'é 中 😀',
      '\ud800 x \udfff',
      '{"a":1}',
      '',
      'a,b{c}',
    ];
    const log = new RunLog('run_data');
    const batch = [log.created(), log.ev('run.started')];
    for (const s of strings) batch.push(log.ev('call.ready', { s, nested: { list: [s, s.length] } }, 'c1'));
    await store.append(batch);
    // A second batch, of several runs at once, as replicas append them.
    const other = new RunLog('run_data2');
    await store.append([
      other.created(),
      log.ev('call.started', { attempt: 1, args: { text: strings.join('\n') } }, 'c1'),
      other.ev('run.started'),
    ]);
    const back = await store.events('run_data');
    expect(back.slice(2, 2 + strings.length).map((e) => e.data)).toEqual(strings.map((s) => ({ s, nested: { list: [s, s.length] } })));
    expect(back.at(-1)?.data).toEqual({ attempt: 1, args: { text: strings.join('\n') } });
    expect((await store.events('run_data2')).map((e) => e.type)).toEqual(['run.created', 'run.started']);
  });

  it('rejects seq gaps, repeats and a wrong first event, writing nothing of that batch', async () => {
    const a = await makeRun('run_a');
    const before = await store.events('run_a');
    const fresh = new RunLog('run_new');
    // A gap: seq 3 is fine, then 5.
    const gap = [
      fresh.created({ key: 'k1', tags: { t: '1' } }),
      a.ev('call.ready', {}, 'c1'),
      { ...a.ev('call.started', {}, 'c1'), seq: 5 },
    ];
    expect(await code(() => store.append(gap))).toBe('seq_out_of_order');
    // A repeat of seq 2.
    expect(await code(() => store.append([{ ...new RunLog('run_a').ev('run.created'), seq: 2, type: 'run.started' } as RunEvent]))).toBe(
      'seq_out_of_order',
    );
    expect(await code(() => store.append([a.ev('call.ready', {}, 'c1'), { ...a.ev('call.ready', {}, 'c1'), seq: 3 }]))).toBe(
      'seq_out_of_order',
    );
    // Events that go on from a run never stored (its created lost, say): refused, and no run appears.
    expect(await code(() => store.append([{ seq: 2, type: 'call.ready', runId: 'run_ghost', callId: 'c1', at: T0, data: {} }]))).toBe(
      'seq_out_of_order',
    );
    expect(await store.run('run_ghost')).toBeUndefined();
    // Nothing of those batches is there: no events, no new run, its key and tags free.
    expect(await store.events('run_a')).toEqual(before);
    expect(await store.events('run_new')).toEqual([]);
    expect(await store.run('run_new')).toBeUndefined();
    expect(await store.findByIdempotencyKey('acme', 'k1')).toBeUndefined();
    expect((await store.list({ limit: 10, tags: [['t', '1']] })).items).toEqual([]);
    // The next seq is still 3.
    await store.append([{ seq: 3, type: 'call.ready', runId: 'run_a', callId: 'c1', at: T0, data: {} }]);
    expect((await store.events('run_a')).map((e) => e.seq)).toEqual([1, 2, 3]);
    // A run must begin with run.created at seq 1, and only there.
    expect(await code(() => store.append([new RunLog('run_x').ev('run.started')]))).toBe('invalid_event');
    expect(await code(() => store.append([{ ...new RunLog('run_a').created(), seq: 4 }]))).toBe('invalid_event');
    expect(await code(() => store.append([{ ...new RunLog('run_y').created(), seq: 0 }]))).toBe('seq_out_of_order');
    await store.append([]);
  });

  it('lists newest first, filters by tenant, status and tags, and pages without gaps or duplicates', async () => {
    const spec: [string, string, string | undefined, Record<string, string>][] = [
      ['r1', 'acme', 'succeeded', { env: 'prod', team: 'a' }],
      ['r2', 'zeta', undefined, { env: 'prod' }],
      ['r3', 'acme', 'failed', { env: 'dev', team: 'a' }],
      ['r4', 'acme', undefined, { env: 'prod', team: 'b' }],
      ['r5', 'zeta', 'partial', {}],
      ['r6', 'acme', 'succeeded', { env: 'prod', team: 'a' }],
      ['r7', 'acme', 'cancelled', { env: 'prod' }],
    ];
    for (const [id, tenant, status, tags] of spec) await makeRun(id, { tenant, tags, ...(status ? { status } : {}) });
    const ids = async (q: Parameters<Store['list']>[0]) => (await store.list(q)).items.map((r) => r.id);

    expect(await ids({ limit: 200 })).toEqual(['r7', 'r6', 'r5', 'r4', 'r3', 'r2', 'r1']);
    expect((await store.list({ limit: 200 })).nextCursor).toBeNull();
    expect(await ids({ limit: 200, tenant: 'zeta' })).toEqual(['r5', 'r2']);
    expect(await ids({ limit: 200, status: ['succeeded'] })).toEqual(['r6', 'r1']);
    expect(await ids({ limit: 200, status: ['running', 'failed'] })).toEqual(['r4', 'r3', 'r2']);
    expect(await ids({ limit: 200, status: [] })).toHaveLength(7);
    expect(await ids({ limit: 200, tags: [['env', 'prod']] })).toEqual(['r7', 'r6', 'r4', 'r2', 'r1']);
    expect(
      await ids({
        limit: 200,
        tags: [
          ['env', 'prod'],
          ['team', 'a'],
        ],
      }),
    ).toEqual(['r6', 'r1']);
    expect(
      await ids({
        limit: 200,
        tags: [
          ['env', 'prod'],
          ['team', 'a'],
        ],
        status: ['succeeded'],
        tenant: 'acme',
      }),
    ).toEqual(['r6', 'r1']);
    expect(await ids({ limit: 200, tags: [['env', 'staging']] })).toEqual([]);

    for (const [query, expected] of [
      [{}, ['r7', 'r6', 'r5', 'r4', 'r3', 'r2', 'r1']],
      [{ tenant: 'acme' }, ['r7', 'r6', 'r4', 'r3', 'r1']],
      [{ tags: [['env', 'prod']] as [string, string][] }, ['r7', 'r6', 'r4', 'r2', 'r1']],
    ] as const) {
      for (const limit of [1, 2, 3, 5]) {
        const seen: string[] = [];
        let cursor: string | undefined;
        let pages = 0;
        do {
          const page = await store.list({ ...query, limit, ...(cursor ? { cursor } : {}) });
          expect(page.items.length).toBeLessThanOrEqual(limit);
          seen.push(...page.items.map((r) => r.id));
          cursor = page.nextCursor ?? undefined;
          if (cursor) expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
          pages++;
        } while (cursor && pages < 20);
        expect(seen).toEqual(expected);
        expect(pages).toBe(Math.max(1, Math.ceil(expected.length / limit)));
      }
    }
    // A page taken, then a newer run: the next page still continues where the first ended.
    const first = await store.list({ limit: 3 });
    await makeRun('r8');
    expect(await ids({ limit: 10, cursor: first.nextCursor as string })).toEqual(['r4', 'r3', 'r2', 'r1']);

    for (const cursor of ['', 'nope!', 'bm9wZQ', Buffer.from('r1:0').toString('base64url'), Buffer.from('r1:-3').toString('base64url')]) {
      expect(await code(() => store.list({ limit: 10, cursor }))).toBe('invalid_cursor');
    }
    for (const limit of [0, 201, 1.5, Number.NaN]) expect(await code(() => store.list({ limit }))).toBe('invalid_limit');
    expect(await ids({ limit: 1 })).toHaveLength(1);
  });

  it('finds a run by its idempotency key, per tenant, and refuses a repeated key', async () => {
    await makeRun('r1', { tenant: 'acme', key: 'k' });
    await makeRun('r2', { tenant: 'zeta', key: 'k' });
    await makeRun('r3', { tenant: 'acme' });
    expect(await store.findByIdempotencyKey('acme', 'k')).toBe('r1');
    expect(await store.findByIdempotencyKey('zeta', 'k')).toBe('r2');
    expect(await store.findByIdempotencyKey('other', 'k')).toBeUndefined();
    expect(await store.findByIdempotencyKey('acme', 'k2')).toBeUndefined();
    expect((await store.run('r1'))?.idempotencyKey).toBe('k');

    expect(await code(() => store.append([new RunLog('r4').created({ tenant: 'acme', key: 'k' })]))).toBe('duplicate_idempotency_key');
    const twice = [new RunLog('r5').created({ key: 'k9' }), new RunLog('r6').created({ key: 'k9' })];
    expect(await code(() => store.append(twice))).toBe('duplicate_idempotency_key');
    expect(await store.run('r4')).toBeUndefined();
    expect(await store.run('r5')).toBeUndefined();
    expect(await store.findByIdempotencyKey('acme', 'k9')).toBeUndefined();
  });

  it('opens a review on call.awaiting_review and closes it on review.decided', async () => {
    const a = new RunLog('run_a');
    const calls = [
      { id: 'c1', tool: 'read_log' },
      { id: 'c2', tool: 'delete_file' },
    ];
    await store.append([
      a.created({ calls }),
      a.ev('run.started'),
      a.ev('call.awaiting_review', { reason: 'deletes files', args: { path: '/x' } }, 'c2'),
    ]);
    const b = await makeRun('run_b', { tenant: 'zeta', calls: [{ id: 'd1', tool: 'send_mail' }] });
    await store.append([b.ev('call.awaiting_review', { reason: 'sends mail', args: {} }, 'd1')]);

    const pending = await store.reviews({ status: 'pending' });
    expect(pending.map((r) => r.id)).toEqual(['rev_run_a_3', 'rev_run_b_3']);
    expect(await store.review('rev_run_a_3')).toEqual({
      id: 'rev_run_a_3',
      runId: 'run_a',
      callId: 'c2',
      tenant: 'acme',
      tool: 'delete_file',
      args: { path: '/x' },
      reason: 'deletes files',
      status: 'pending',
      decision: null,
      createdAt: new Date(T0 + 30).toISOString(),
      decidedAt: null,
    });
    expect((await store.reviews({ tenant: 'zeta' })).map((r) => r.id)).toEqual(['rev_run_b_3']);
    expect((await store.reviews({ runId: 'run_a', status: 'pending' })).map((r) => r.id)).toEqual(['rev_run_a_3']);

    await store.append([a.ev('review.decided', { decision: 'edit', args: { path: '/y' }, comment: 'ok' }, 'c2')]);
    expect(await store.review('rev_run_a_3')).toMatchObject({
      status: 'decided',
      decision: 'edit',
      decidedAt: new Date(T0 + 40).toISOString(),
    });
    expect((await store.reviews({ status: 'pending' })).map((r) => r.id)).toEqual(['rev_run_b_3']);
    expect((await store.reviews({ status: 'decided' })).map((r) => r.id)).toEqual(['rev_run_a_3']);
    expect((await store.reviews({})).map((r) => r.id)).toEqual(['rev_run_a_3', 'rev_run_b_3']);
    expect(await store.review('nope')).toBeUndefined();

    // A call added by a replan takes its tool from run.replanned; an unknown call is refused.
    await store.append([
      a.ev('run.completed', { status: 'needs_replan' }),
      a.ev('run.replanned', { calls: [{ id: 'c9', tool: 'wipe', args: {} }], edges: [] }),
    ]);
    await store.append([a.ev('call.awaiting_review', { reason: 'wipes', args: {} }, 'c9')]);
    expect((await store.review('rev_run_a_7'))?.tool).toBe('wipe');
    expect(await code(() => store.append([a.ev('call.awaiting_review', { reason: 'x', args: {} }, 'zz')]))).toBe('invalid_event');
  });

  it('counts unfinished, active and per-status runs', async () => {
    await makeRun('r1', { tenant: 'acme' });
    await makeRun('r2', { tenant: 'acme', status: 'succeeded' });
    await makeRun('r3', { tenant: 'zeta' });
    await makeRun('r4', { tenant: 'acme', status: 'needs_replan' });
    await makeRun('r5', { tenant: 'acme' });
    expect(await store.unfinished()).toEqual(['r1', 'r3', 'r5']);
    expect(await store.activeCount('acme')).toBe(2);
    expect(await store.activeCount('zeta')).toBe(1);
    expect(await store.activeCount('none')).toBe(0);
    expect(await store.countsByStatus()).toMatchObject({ running: 3, succeeded: 1, needs_replan: 1, failed: 0, queued: 0 });
    expect(await store.countsByStatus('acme')).toMatchObject({ running: 2, succeeded: 1, needs_replan: 1 });
    expect(await store.countsByStatus('zeta')).toMatchObject({ running: 1, succeeded: 0 });
  });
});

describe('store: sqlite only', () => {
  it('keeps everything across a reopen, and the log continues at the next seq', async () => {
    let store = openSqliteStore(file);
    const a = new RunLog('run_a');
    await store.append([a.created({ key: 'k', tags: { env: 'prod' }, calls: [{ id: 'c1', tool: 'rm' }] }), a.ev('run.started')]);
    await store.append([a.ev('call.awaiting_review', { reason: 'r', args: {} }, 'c1')]);
    const read = async (s: Store) => ({
      events: await s.events('run_a'),
      run: await s.run('run_a'),
      list: await s.list({ limit: 5 }),
      reviews: await s.reviews({}),
    });
    const before = await read(store);
    await store.close();

    store = openSqliteStore(file);
    expect(await read(store)).toEqual(before);
    expect(await store.findByIdempotencyKey('acme', 'k')).toBe('run_a');
    expect(await store.unfinished()).toEqual(['run_a']);
    expect(await code(() => store.append([{ ...a.ev('call.ready', {}, 'c1'), seq: 3 }]))).toBe('seq_out_of_order');
    a.seq = 3;
    await store.append([a.ev('review.decided', { decision: 'approve' }, 'c1'), a.ev('run.completed', { status: 'succeeded' })]);
    await store.close();

    store = openSqliteStore(file);
    expect((await store.events('run_a')).map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect((await store.run('run_a'))?.status).toBe('succeeded');
    expect((await store.review('rev_run_a_3'))?.decision).toBe('approve');
    await store.close();
  });

  it('runs each migration once: reopening applies nothing and does not fail', async () => {
    await openSqliteStore(file).close();
    await openSqliteStore(file).close();
    const db = new Database(file);
    try {
      expect(db.prepare('SELECT version, name FROM schema_migrations').all()).toEqual([{ version: 1, name: '0001_init.sql' }]);
      expect(migrate(db)).toEqual([]);
      expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    } finally {
      db.close();
    }
    const mem = openSqliteStore(':memory:');
    await mem.append([new RunLog('m').created()]);
    expect((await mem.run('m'))?.status).toBe('running');
    await mem.close();
  });

  it('reports append throughput (10k events in batches of 10)', async () => {
    const store = openSqliteStore(file);
    const N = 10_000;
    const logs = Array.from({ length: 100 }, (_, i) => new RunLog(`run_${i}`));
    const batches: RunEvent[][] = [];
    const pending: RunEvent[] = [];
    for (let i = 0; i < N; i++) {
      const log = logs[Math.floor(i / 100)] as RunLog;
      pending.push(log.seq === 0 ? log.created() : log.ev('call.succeeded', { attempt: 1, output: { n: i, text: 'x'.repeat(64) } }, 'c1'));
      if (pending.length === 10) batches.push(pending.splice(0));
    }
    const t = performance.now();
    for (const b of batches) await store.append(b);
    const ms = performance.now() - t;
    console.log(
      `sqlite append: ${N} events in ${batches.length} transactions, ${ms.toFixed(0)} ms, ${Math.round((N / ms) * 1000)} events/s`,
    );
    expect((await store.countsByStatus()).running).toBe(100);
    await store.close();
  });
});
