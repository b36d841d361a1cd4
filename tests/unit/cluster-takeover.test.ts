import { describe, expect, it } from 'vitest';
import { takeOver, type TakeoverSource } from '../../src/cluster/takeover.js';

/** An in-memory stand-in for the runs table: orphans claimed oldest first, each by one replica. */
class FakeRuns {
  readonly orphans: string[];
  readonly owner = new Map<string, string>();
  constructor(n: number) {
    this.orphans = Array.from({ length: n }, (_, i) => `run-${String(i).padStart(5, '0')}`);
  }
  claim(replica: string, limit: number): string[] {
    const ids = this.orphans.splice(0, limit);
    for (const id of ids) this.owner.set(id, replica);
    return ids;
  }
}

/** A replica over the fake: resumes wait for `release`, so the test decides when each ends. */
function replica(runs: FakeRuns, name: string, log: string[]) {
  const waiting: (() => void)[] = [];
  const state = { running: 0, most: 0, held: 0, mostHeld: 0, resumed: [] as string[] };
  const source: TakeoverSource = {
    claim: async (limit) => {
      await Promise.resolve();
      const ids = runs.claim(name, limit);
      state.held += ids.length;
      state.mostHeld = Math.max(state.mostHeld, state.held);
      return ids;
    },
    resume: async (id) => {
      expect(runs.owner.get(id)).toBe(name);
      state.running++;
      state.most = Math.max(state.most, state.running);
      await new Promise<void>((resolve) => waiting.push(resolve));
      state.running--;
      state.held--;
      state.resumed.push(id);
      log.push(`${name}:${id}`);
    },
    active: () => true,
  };
  return { source, state, waiting };
}

/** Ends every resume that waits now. */
function releaseAll(waiting: (() => void)[]): void {
  for (const release of waiting.splice(0)) release();
}

/** Lets every pending promise settle. */
const settle = async () => {
  for (let i = 0; i < 50; i++) await Promise.resolve();
};

describe('takeOver (cluster/takeover.ts)', () => {
  it('resumes at most `concurrency` at once, reaches it, and claims only as it resumes', async () => {
    const runs = new FakeRuns(300);
    const log: string[] = [];
    const r = replica(runs, 'a', log);
    const done = takeOver(r.source, [], { concurrency: 8, batch: 16 });
    let finished = false;
    void done.then(() => (finished = true));
    while (!finished) {
      await settle();
      expect(r.state.running).toBeLessThanOrEqual(8);
      // Never more claimed and not resumed than the workers plus one batch.
      expect(r.state.held).toBeLessThanOrEqual(8 + 16);
      releaseAll(r.waiting);
    }
    const pass = await done;
    expect(r.state.most).toBe(8);
    expect(pass.claimed).toHaveLength(300);
    expect(new Set(pass.resumed).size).toBe(300);
    expect(pass.resumed).toHaveLength(300);
    expect(runs.orphans).toHaveLength(0);
    expect(pass.error).toBeUndefined();
  });

  it('two replicas scanning at once split the runs, each resumed exactly once', async () => {
    const runs = new FakeRuns(2000);
    const log: string[] = [];
    const a = replica(runs, 'a', log);
    const b = replica(runs, 'b', log);
    const passes = Promise.all([takeOver(a.source, [], { concurrency: 32 }), takeOver(b.source, [], { concurrency: 32 })]);
    let finished = false;
    void passes.then(() => (finished = true));
    while (!finished) {
      await settle();
      releaseAll(a.waiting);
      releaseAll(b.waiting);
    }
    const [pa, pb] = await passes;
    expect(pa.resumed.length).toBeGreaterThan(0);
    expect(pb.resumed.length).toBeGreaterThan(0);
    expect(pa.resumed.length + pb.resumed.length).toBe(2000);
    expect(new Set(log.map((l) => l.slice(2))).size).toBe(2000);
    expect(a.state.most).toBe(32);
    expect(b.state.most).toBe(32);
  });

  it('a slower replica takes fewer: claims follow resumes', async () => {
    const runs = new FakeRuns(400);
    const log: string[] = [];
    const fast = replica(runs, 'f', log);
    const slow = replica(runs, 's', log);
    const passes = Promise.all([takeOver(fast.source, [], { concurrency: 4 }), takeOver(slow.source, [], { concurrency: 4 })]);
    let finished = false;
    void passes.then(() => (finished = true));
    for (let turn = 0; !finished; turn++) {
      await settle();
      releaseAll(fast.waiting);
      if (turn % 4 === 0) releaseAll(slow.waiting);
    }
    const [pf, ps] = await passes;
    expect(pf.resumed.length + ps.resumed.length).toBe(400);
    expect(pf.resumed.length).toBeGreaterThan(ps.resumed.length * 2);
  });

  it('resumes its own unresumed runs first, and stops at a failed resume, leaving the rest claimed', async () => {
    const runs = new FakeRuns(100);
    const order: string[] = [];
    let failed = false;
    const source: TakeoverSource = {
      claim: async (limit) => runs.claim('a', limit),
      resume: async (id) => {
        order.push(id);
        if (order.length === 5 && !failed) {
          failed = true;
          throw new Error('store away');
        }
      },
      active: () => true,
    };
    const pass = await takeOver(source, ['mine-1', 'mine-2'], { concurrency: 1, batch: 10 });
    expect(order.slice(0, 2)).toEqual(['mine-1', 'mine-2']);
    expect(order).toHaveLength(5);
    expect(pass.resumed).toHaveLength(4);
    expect((pass.error as Error).message).toBe('store away');
    // Claimed (owned here, not resumed): a later scan's "owned but not running" read finds them.
    expect(pass.claimed).toHaveLength(10);
    expect(runs.orphans).toHaveLength(90);
  });

  it('stops claiming and resuming once the lease is gone', async () => {
    const runs = new FakeRuns(100);
    let active = true;
    const seen: string[] = [];
    const source: TakeoverSource = {
      claim: async (limit) => runs.claim('a', limit),
      resume: async (id) => {
        seen.push(id);
        if (seen.length === 3) active = false;
      },
      active: () => active,
    };
    const pass = await takeOver(source, [], { concurrency: 1, batch: 10 });
    expect(pass.resumed).toHaveLength(3);
    expect(runs.orphans).toHaveLength(90);
  });

  it('a failed claim ends the pass after what was claimed is resumed', async () => {
    const runs = new FakeRuns(100);
    let claims = 0;
    const resumed: string[] = [];
    const source: TakeoverSource = {
      claim: async (limit) => {
        if (++claims === 2) throw new Error('connection refused');
        return runs.claim('a', limit);
      },
      resume: async (id) => {
        resumed.push(id);
      },
      active: () => true,
    };
    const pass = await takeOver(source, [], { concurrency: 2, batch: 4 });
    expect(resumed).toHaveLength(4);
    expect((pass.error as Error).message).toBe('connection refused');
  });
});
