/**
 * The SQLite store's writer thread (`appendAsync`, src/store/writer-thread.ts): batches are checked
 * here like `append`'s, committed on another connection, readable once settled, and kept in order with
 * `append`; a refused batch stores nothing. And the engine's group commit on top of it: many runs
 * submitted in one turn share commits, and each is stored before its submission resolves.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunEvent } from '../src/core/events.js';
import { Engine } from '../src/engine/engine.js';
import { openSqliteStore } from '../src/store/sqlite.js';
import type { Store } from '../src/store/types.js';
import { benchConfig } from '../src/bench/workloads.js';

let dir: string;
let store: Store;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'toolgraph-writer-'));
  store = openSqliteStore(join(dir, 'w.db'));
});
afterEach(() => {
  store.close();
  rmSync(dir, { recursive: true, force: true });
});

const created = (runId: string): RunEvent => ({ seq: 1, type: 'run.created', runId, at: 1, data: { tenant: 'acme', failure: 'partial', tags: {}, calls: [{ id: 'c1', tool: 't', args: {} }] } });
const started = (runId: string, seq: number): RunEvent => ({ seq, type: 'run.started', runId, at: 2, data: {} });

describe('appendAsync', () => {
  it('a file store has it; a batch is readable once it settles', async () => {
    expect(store.appendAsync).toBeTypeOf('function');
    const pending = store.appendAsync!([created('r1'), started('r1', 2)]);
    await pending.done;
    expect(store.events('r1').map((e) => e.seq)).toEqual([1, 2]);
    expect(store.run('r1')?.status).toBe('running');
  });

  it('wait blocks until the batch is stored; append after it continues the same run in order', () => {
    store.appendAsync!([created('r1')]).wait();
    store.appendAsync!([started('r1', 2)]);
    // append waits for the batch in flight first, so seq 3 follows 2
    store.append([started('r1', 3)]);
    expect(store.events('r1').map((e) => e.seq)).toEqual([1, 2, 3]);
  });

  it('a batch that breaks a rule is refused whole, and nothing of it is stored', async () => {
    await store.appendAsync!([created('r1')]).done;
    const bad = store.appendAsync!([created('r2'), started('r1', 5)]);
    await expect(bad.done).rejects.toMatchObject({ code: 'seq_out_of_order' });
    expect(() => bad.wait()).toThrow(/seq 5/);
    expect(store.run('r2')).toBeUndefined();
    await store.appendAsync!([started('r1', 2)]).done;
    expect(store.events('r1').map((e) => e.seq)).toEqual([1, 2]);
  });

  it('a batch the database refuses on the writer thread rejects with its error; the seq cache stays as the file is', async () => {
    const other = new Database(join(dir, 'w.db'));
    other.exec(`CREATE TRIGGER refuse BEFORE INSERT ON runs BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END`);
    await expect(store.appendAsync!([created('r1')]).done).rejects.toThrow('refused by a trigger');
    other.exec('DROP TRIGGER refuse');
    other.close();
    await store.appendAsync!([created('r1'), started('r1', 2)]).done;
    expect(store.events('r1').map((e) => e.seq)).toEqual([1, 2]);
  });

  it('is in memory-only stores absent (no second connection can reach them)', () => {
    const mem = openSqliteStore(':memory:');
    expect(mem.appendAsync).toBeUndefined();
    mem.close();
  });
});

describe('engine group commit', () => {
  it('runs submitted in one turn are stored before their submissions resolve, sharing commits', async () => {
    let commits = 0;
    const appendAsync = store.appendAsync!.bind(store);
    const sink = {
      append: (events: readonly RunEvent[]) => store.append(events),
      appendAsync: (events: readonly RunEvent[]) => {
        commits++;
        return appendAsync(events);
      },
    };
    const engine = new Engine({ config: benchConfig({ tool: {}, maxCallsPerRun: 1000 }), sink });
    const calls = Array.from({ length: 5 }, (_, i) => ({ id: `c${i}`, tool: 'echo', args: { i } }));
    const submissions = Array.from({ length: 20 }, () => engine.submitGrouped({ calls }));
    const views = await Promise.all(submissions);
    for (const v of views) expect(store.run(v.id)).toBeDefined();
    expect(commits).toBeLessThan(20);
    const ended = await Promise.all(views.map((v) => engine.wait(v.id, 10_000)));
    expect(ended.map((v) => v?.status)).toEqual(views.map(() => 'succeeded'));
    for (const v of views) expect(store.run(v.id)?.status).toBe('succeeded');
    await engine.close();
  });
});
