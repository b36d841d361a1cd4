/**
 * How long the engine keeps ended runs in memory (src/engine/engine.ts, `forgetOldRuns`): for
 * `retainEndedMs`, and never more than the newest `retainEndedRuns` of them, so memory stays bounded
 * whatever the rate of runs; a run someone still listens to stays. The clock is injected, so the test
 * decides when "later" is.
 */
import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/engine/engine.js';
import { benchConfig } from '../../src/bench/workloads.js';

function engine(opts: { retainEndedMs?: number; retainEndedRuns?: number }) {
  let now = 1_000;
  const e = new Engine({ config: benchConfig(), clock: () => now, ...opts });
  return { e, later: (ms: number) => (now += ms) };
}

async function run(e: Engine, id: string): Promise<void> {
  e.submit({ runId: id, calls: [{ id: 'x', tool: 'echo', args: {} }] });
  expect((await e.wait(id, 5_000))?.status).toBe('succeeded');
}

describe('ended runs in memory', () => {
  it('keeps at most retainEndedRuns of them, forgetting the oldest first', async () => {
    const { e } = engine({ retainEndedRuns: 2 });
    for (const id of ['r1', 'r2', 'r3', 'r4', 'r5']) await run(e, id);
    expect(['r1', 'r2', 'r3', 'r4', 'r5'].map((id) => e.has(id))).toEqual([false, false, false, true, true]);
    await e.close();
  });

  it('forgets them once retainEndedMs has passed, except one with a listener', async () => {
    const { e, later } = engine({ retainEndedMs: 60_000 });
    await run(e, 'old');
    await run(e, 'watched');
    const stop = e.subscribe('watched', () => {});
    later(61_000);
    await run(e, 'new');
    expect([e.has('old'), e.has('watched'), e.has('new')]).toEqual([false, true, true]);
    stop();
    await e.close();
  });
});
