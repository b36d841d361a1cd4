/**
 * `Engine.restore` of a run the engine already holds (several replicas, DESIGN §12): a replica's scan
 * reads the runs it owns from the database, and resumes those its engine does not hold. A run whose
 * first commit is stored but not yet applied here (so not yet visible), and whose calls have all ended
 * already in the scheduler (so not live either), looked like one to resume: restoring it failed, the
 * failure forgot the run's view, and the engine crashed when the commit landed (found by the replica
 * benchmark: a TypeError in RunViews.publish after a few thousand runs on one replica). Restoring a run
 * the engine holds does nothing.
 *
 * The sink stores each batch in a memory store at once but answers only when the test lets it, so the
 * test holds the engine exactly in that window.
 */
import { describe, expect, it } from 'vitest';
import type { RunEvent } from '../../src/core/events.js';
import { Engine, type EventSink } from '../../src/engine/engine.js';
import type { ExecuteRequest, ExecuteResult, Executor } from '../../src/executors/types.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { benchConfig } from '../../src/bench/workloads.js';
import { untilTrue } from '../helpers/wait.js';

class GatedSink implements EventSink {
  readonly store = createMemoryStore();
  batches = 0;
  private chain: Promise<unknown> = Promise.resolve();
  private gates: (() => void)[] = [];
  private open = false;

  append(events: readonly RunEvent[]): Promise<void> {
    this.batches++;
    const stored = this.chain.then(() => this.store.append(events));
    this.chain = stored.catch(() => {});
    if (this.open) return stored.then(() => {});
    return new Promise((resolve, reject) => this.gates.push(() => stored.then(() => resolve(), reject)));
  }

  release(): void {
    this.open = true;
    for (const g of this.gates.splice(0)) g();
  }
}

/** Answers after `args.ms`. */
const executor: Executor = {
  async execute(r: ExecuteRequest): Promise<ExecuteResult> {
    await new Promise((resolve) => setTimeout(resolve, Number(r.args.ms ?? 0)));
    return { ok: true, output: r.args };
  },
  async close() {},
};

describe('restoring a run the engine holds', () => {
  it('does nothing: the run goes on, and its commits land', async () => {
    const sink = new GatedSink();
    const engine = new Engine({ config: benchConfig({ tool: {}, maxCallsPerRun: 1000 }), sink, executor });
    const submitted = engine.submitGrouped({ runId: 'run_held', calls: [{ id: 'a', tool: 'echo', args: { ms: 20 } }] });
    // Its call has ended in the scheduler (started early, before anything was stored), while nothing of
    // the run has been applied here: not live, not visible.
    await untilTrue(() => sink.batches >= 1 && !engine.liveRuns().includes('run_held') && !engine.has('run_held'), 5000);
    const stored = await sink.store.events('run_held');
    expect(stored[0]?.type).toBe('run.created');
    await engine.restore(stored);
    sink.release();
    expect((await submitted).id).toBe('run_held');
    expect((await engine.wait('run_held', 5000))?.status).toBe('succeeded');
    const events = await sink.store.events('run_held');
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.type === 'run.completed')).toHaveLength(1);
    await engine.close();
  });
});
