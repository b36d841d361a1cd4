/**
 * The SQLite store's writer thread (a file store's `append`, src/store/writer-thread.ts): batches are
 * checked on the main thread, committed on another connection, readable once settled, and kept in
 * order; a refused batch stores nothing. And the engine's group commit on top of it: many runs
 * submitted in one turn share commits, and each is stored before its submission resolves.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../src/core/events.js';
import { Engine } from '../../src/engine/engine.js';
import type { PermitGate } from '../../src/engine/options.js';
import { until } from '../helpers/wait.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';
import { benchConfig } from '../../src/bench/workloads.js';

let dir: string;
let store: Store;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'toolgraph-writer-'));
  store = openSqliteStore(join(dir, 'w.db'));
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const created = (runId: string): RunEvent => ({
  seq: 1,
  type: 'run.created',
  runId,
  at: 1,
  data: { tenant: 'acme', failure: 'partial', tags: {}, calls: [{ id: 'c1', tool: 't', args: {} }], estimates: {} },
});
const started = (runId: string, seq: number): RunEvent => ({
  seq,
  type: 'run.started',
  runId,
  at: 2,
  data: { edges: [], generations: [], diagnostics: [] },
});

describe('append on the writer thread', () => {
  it('a batch is readable once it settles', async () => {
    await store.append([created('r1'), started('r1', 2)]);
    expect((await store.events('r1')).map((e) => e.seq)).toEqual([1, 2]);
    expect((await store.run('r1'))?.status).toBe('running');
  });

  it('batches in flight continue the same run in order', async () => {
    void store.append([created('r1')]);
    void store.append([started('r1', 2)]);
    await store.append([started('r1', 3)]);
    expect((await store.events('r1')).map((e) => e.seq)).toEqual([1, 2, 3]);
  });

  it('a batch that breaks a rule is refused whole, and nothing of it is stored', async () => {
    await store.append([created('r1')]);
    const bad = store.append([created('r2'), started('r1', 5)]);
    await expect(bad).rejects.toMatchObject({ code: 'seq_out_of_order' });
    expect(await store.run('r2')).toBeUndefined();
    await store.append([started('r1', 2)]);
    expect((await store.events('r1')).map((e) => e.seq)).toEqual([1, 2]);
  });

  it('a batch the database refuses on the writer thread rejects with its error; the seq cache stays as the file is', async () => {
    const other = new Database(join(dir, 'w.db'));
    other.exec(`CREATE TRIGGER refuse BEFORE INSERT ON runs BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END`);
    await expect(store.append([created('r1')])).rejects.toThrow('refused by a trigger');
    other.exec('DROP TRIGGER refuse');
    other.close();
    await store.append([created('r1'), started('r1', 2)]);
    expect((await store.events('r1')).map((e) => e.seq)).toEqual([1, 2]);
  });

  it('a run.created for a run the file holds is refused with the seq_out_of_order that append gives, though no query planned it', async () => {
    await store.append([created('r1'), started('r1', 2)]);
    let sync: unknown;
    try {
      await store.append([created('r1')]);
    } catch (err) {
      sync = err;
    }
    expect(sync).toMatchObject({ code: 'seq_out_of_order' });
    // A fresh store on the same file: no cached seq knows r1, so the batch goes to the writer unchecked.
    await store.close();
    store = openSqliteStore(join(dir, 'w.db'));
    const bad = store.append([created('r2'), created('r1')]);
    await expect(bad).rejects.toMatchObject({ code: 'seq_out_of_order', message: (sync as Error).message });
    // Nothing of the batch is stored, and the store goes on from the file.
    expect(await store.run('r2')).toBeUndefined();
    expect((await store.events('r1')).map((e) => e.seq)).toEqual([1, 2]);
    await store.append([created('r2'), started('r1', 3)]);
    expect((await store.events('r1')).map((e) => e.seq)).toEqual([1, 2, 3]);
    expect((await store.events('r2')).map((e) => e.seq)).toEqual([1]);
  });

  it('a run.created for a run still in flight is refused when planned', async () => {
    const first = store.append([created('r1')]);
    const again = store.append([created('r1')]);
    // The refusal is known at once: handle it before waiting for the first batch (else it goes unhandled meanwhile).
    const refused = expect(again).rejects.toMatchObject({ code: 'seq_out_of_order' });
    await first;
    await refused;
    expect((await store.events('r1')).map((e) => e.seq)).toEqual([1]);
  });

  it('several batches in flight are stored in order, each on top of the one before', async () => {
    const a = store.append([created('r1')]);
    const b = store.append([started('r1', 2), created('r2')]);
    const c = store.append([started('r1', 3), started('r2', 2)]);
    const order: string[] = [];
    await Promise.all([a, b, c].map((p, i) => p.then(() => order.push('abc'[i] as string))));
    expect(order).toEqual(['a', 'b', 'c']);
    expect((await store.events('r1')).map((e) => e.seq)).toEqual([1, 2, 3]);
    expect((await store.events('r2')).map((e) => e.seq)).toEqual([1, 2]);
  });

  it('a batch is acknowledged only once committed: readable from another connection when it resolves', async () => {
    const other = new Database(join(dir, 'w.db'), { readonly: true });
    const seen: number[] = [];
    const pendings = ['r1', 'r2', 'r3'].map((id) => store.append([created(id)]));
    await Promise.all(
      pendings.map((p, i) =>
        p.then(() =>
          seen.push(
            other
              .prepare('SELECT count(*) FROM runs WHERE id = ?')
              .pluck()
              .get(`r${i + 1}`) as number,
          ),
        ),
      ),
    );
    expect(seen).toEqual([1, 1, 1]);
    other.close();
  });

  it('when a batch fails on the writer thread, every later batch in flight is refused, nothing of them stored; later ones go in again', async () => {
    const other = new Database(join(dir, 'w.db'));
    other.exec(`CREATE TRIGGER refuse BEFORE INSERT ON runs WHEN NEW.id = 'bad' BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END`);
    await store.append([created('r1')]);
    const settled: string[] = [];
    const bad = store.append([started('r1', 2), created('bad')]);
    // Valid on their own, but planned on top of the bad one (r1's seq 3 follows its seq 2).
    const later = [store.append([started('r1', 3)]), store.append([created('r2')])];
    const outcomes = await Promise.all(
      [bad, ...later].map((p, i) =>
        p.then(
          () => settled.push(`${i}:ok`),
          (err: { code?: string }) => settled.push(`${i}:${err.code ?? 'error'}`),
        ),
      ),
    );
    expect(outcomes).toHaveLength(3);
    expect(settled).toEqual(['0:SQLITE_CONSTRAINT_TRIGGER', '1:batch_refused', '2:batch_refused']);
    expect((await store.events('r1')).map((e) => e.seq)).toEqual([1]);
    expect(await store.run('r2')).toBeUndefined();
    // Planned from what the file holds now: they go in.
    await store.append([started('r1', 2), created('r2')]);
    await store.append([started('r1', 3)]);
    expect((await store.events('r1')).map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(await store.run('r2')).toBeDefined();
    other.exec('DROP TRIGGER refuse');
    other.close();
  });
});

/** The store as an engine's sink, counting the group commits handed to its writer thread. */
function countingSink() {
  const commits = { n: 0 };
  const sink = {
    append: (events: readonly RunEvent[]) => {
      commits.n++;
      return store.append(events);
    },
  };
  return { sink, commits };
}

describe('engine group commit', () => {
  it('runs submitted in one turn are stored before their submissions resolve, sharing commits', async () => {
    const { sink, commits } = countingSink();
    const engine = new Engine({ config: benchConfig({ tool: {}, maxCallsPerRun: 1000 }), sink });
    const calls = Array.from({ length: 5 }, (_, i) => ({ id: `c${i}`, tool: 'echo', args: { i } }));
    const submissions = Array.from({ length: 20 }, () => engine.submitGrouped({ calls }));
    const views = await Promise.all(submissions);
    for (const v of views) expect(await store.run(v.id)).toBeDefined();
    expect(commits.n).toBeLessThan(20);
    const ended = await Promise.all(views.map((v) => engine.wait(v.id, 10_000)));
    expect(ended.map((v) => v?.status)).toEqual(views.map(() => 'succeeded'));
    for (const v of views) expect((await store.run(v.id))?.status).toBe('succeeded');
    await engine.close();
  });

  it('with commits in flight one after another, a failed one refuses those after it; each submission resolves only once stored, the bad one alone is refused', async () => {
    const other = new Database(join(dir, 'w.db'));
    other.exec(
      `CREATE TRIGGER refuse BEFORE INSERT ON runs WHEN NEW.tenant = 'bad' BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END`,
    );
    const { sink, commits } = countingSink();
    const engine = new Engine({ config: benchConfig({ tool: {}, maxCallsPerRun: 1000 }), sink });
    const calls = Array.from({ length: 3 }, (_, i) => ({ id: `c${i}`, tool: 'echo', args: { i } }));
    const results: { tenant: string; ok: boolean; storedWhenResolved?: boolean }[] = [];
    const submit = (tenant: string) =>
      engine.submitGrouped({ tenant, calls }).then(
        async (v) => results.push({ tenant, ok: true, storedWhenResolved: (await store.run(v.id)) !== undefined }),
        () => results.push({ tenant, ok: false }),
      );
    // One submission per turn: each takes a commit of its own, sent while the one before is in flight.
    const all: Promise<unknown>[] = [];
    for (const tenant of ['t1', 'bad', 't2', 't3', 't4']) {
      all.push(submit(tenant));
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(all);
    expect(commits.n).toBeGreaterThanOrEqual(3);
    expect(results.find((r) => r.tenant === 'bad')).toEqual({ tenant: 'bad', ok: false });
    const good = results.filter((r) => r.tenant !== 'bad');
    expect(good.map((r) => r.tenant).sort()).toEqual(['t1', 't2', 't3', 't4']);
    expect(good.every((r) => r.ok && r.storedWhenResolved)).toBe(true);
    expect((await store.list({ limit: 50, tenant: 'bad' })).items).toEqual([]);
    for (const t of ['t1', 't2', 't3', 't4']) {
      const [run] = (await store.list({ limit: 5, tenant: t })).items;
      expect((await engine.wait(run!.id, 10_000))?.status).toBe('succeeded');
      expect((await store.run(run!.id))?.status).toBe('succeeded');
    }
    await engine.close();
    other.exec('DROP TRIGGER refuse');
    other.close();
  });

  it("a gate that grants at once (slices): calls start with their submission, with no ask, and every permit is given back, a refused run's too", async () => {
    const other = new Database(join(dir, 'w.db'));
    other.exec(
      `CREATE TRIGGER refuse BEFORE INSERT ON runs WHEN NEW.tenant = 'bad' BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END`,
    );
    const granted: string[] = [];
    const released: string[] = [];
    let asked = 0;
    const gate: PermitGate = {
      acquire: async (rs) => {
        asked += rs.length;
        return rs.map(() => ({ granted: true }));
      },
      grantNow: (rs) => rs.map((r) => granted.push(`${r.runId}/${r.callId}`) > 0),
      release: (ps) => {
        for (const p of ps) released.push(`${p.runId}/${p.callId}`);
      },
      onFreed: () => {},
    };
    const { sink, commits } = countingSink();
    // Tool limits make every call ask the gate.
    const engine = new Engine({ config: benchConfig({ tool: { echo: 100, search: 100 }, maxCallsPerRun: 1000 }), sink, permits: gate });
    const calls = [
      { id: 'a', tool: 'echo', args: { x: 1 } },
      { id: 'b', tool: 'echo', args: { x: 2 } },
    ];
    const good = await engine.submitGrouped({ tenant: 'ok', calls });
    expect((await engine.wait(good.id, 10_000))?.status).toBe('succeeded');
    // Two independent instant calls granted at once: started early with the submission, as without a
    // gate, so the run needs its submission's commit and one for their ends, not a commit per grant.
    expect(commits.n).toBeLessThanOrEqual(2);
    // The refused run's calls still run when the store refuses it (a search sleeps 300 ms): their ends
    // are ignored, so the refusal gives their permits back.
    const slow = [
      { id: 'a', tool: 'search', args: { ms: 300 } },
      { id: 'b', tool: 'search', args: { ms: 300 } },
    ];
    await expect(engine.submitGrouped({ tenant: 'bad', calls: slow })).rejects.toThrow();
    await until('every permit given back', () => (released.length >= granted.length ? true : undefined), 5000);
    // Closed: nothing more can end, so a permit given back twice would show here.
    await engine.close();
    expect(asked).toBe(0);
    expect(granted).toHaveLength(4);
    expect([...released].sort()).toEqual([...granted].sort());
    other.exec('DROP TRIGGER refuse');
    other.close();
  });
});
