/**
 * Early starts (src/engine/engine.ts, `startsEarly`): until a grouped submission is sent to the store,
 * its run is not accepted; its idempotent calls start at once, and its idempotent builtin calls as they
 * become ready, before their events are stored, so that a run of instant calls needs one commit; every
 * other attempt keeps write-ahead (its `call.started`, and the outcomes it depends on, are stored before
 * it starts).
 * And when the store refuses such a submission, the run leaves nothing behind: its early attempts are
 * aborted, and the scheduler holds neither the run nor the limit slots its calls took.
 *
 * The sink here commits like the SQLite store's writer thread, a few milliseconds after it is handed a
 * batch (into an in-memory store, which checks batches exactly as SQLite's does), and the executor
 * notes, at each start, what the sink had stored of the run by then.
 */
import { describe, expect, it } from 'vitest';
import type { CallInput } from '../../src/core/calls.js';
import type { RunEvent } from '../../src/core/events.js';
import { Engine, type EventSink } from '../../src/engine/engine.js';
import type { ExecuteRequest, ExecuteResult, Executor } from '../../src/executors/types.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { benchConfig, benchConfigYaml } from '../../src/bench/workloads.js';
import { parseConfig } from '../../src/config/load.js';
import { untilTrue } from '../helpers/wait.js';

/**
 * Commits each batch 3 ms after the one before it settled, in order, into a memory store; several may be
 * in flight. Once one fails, those already in flight behind it are refused (as SQLite's writer does).
 */
class SlowSink implements EventSink {
  readonly store = createMemoryStore();
  commits = 0;
  private chain: Promise<unknown> = Promise.resolve();
  private epoch = 0;

  append(events: readonly RunEvent[]): Promise<void> {
    this.commits++;
    const epoch = this.epoch;
    const done = this.chain.then(async () => {
      await new Promise((r) => setTimeout(r, 3));
      if (epoch !== this.epoch) throw Object.assign(new Error('refused: an earlier batch was not stored'), { code: 'batch_refused' });
      try {
        await this.store.append(events);
      } catch (err) {
        this.epoch++;
        throw err;
      }
    });
    this.chain = done.catch(() => {});
    return done;
  }
}

interface Start {
  runId: string;
  callId: string;
  tool: string;
  /** The types of the run's events the sink had stored when the attempt started. */
  stored: string[];
  signal: AbortSignal;
}

/**
 * Answers at once with the args as output; a call with `hold: true` waits until aborted, one with
 * `delayMs` answers after that long.
 */
function recordingExecutor(sink: SlowSink): Executor & { starts: Start[] } {
  const starts: Start[] = [];
  return {
    starts,
    async execute(r: ExecuteRequest): Promise<ExecuteResult> {
      // The memory store reads at the call: `stored` is what it held at this start.
      const stored = sink.store.events(r.runId);
      const start: Start = { runId: r.runId, callId: r.callId, tool: r.tool.name, stored: [], signal: r.signal };
      starts.push(start);
      start.stored = (await stored).map((e) => `${e.type}${e.callId ? `:${e.callId}` : ''}`);
      if (r.args.hold === true) {
        await new Promise((resolve) =>
          r.signal.aborted ? resolve(undefined) : r.signal.addEventListener('abort', resolve, { once: true }),
        );
        return { ok: false, error: { code: 'cancelled', message: 'aborted' }, retryable: false };
      }
      if (typeof r.args.delayMs === 'number') await new Promise((resolve) => setTimeout(resolve, r.args.delayMs as number));
      return { ok: true, output: r.args };
    },
    async close() {},
  };
}

function setup(limits: Parameters<typeof benchConfig>[0] = { tool: {}, maxCallsPerRun: 1000 }) {
  const sink = new SlowSink();
  const executor = recordingExecutor(sink);
  const engine = new Engine({ config: benchConfig(limits), sink, executor });
  const startOf = (runId: string, callId: string) => executor.starts.find((s) => s.runId === runId && s.callId === callId);
  return { sink, executor, engine, startOf };
}

const echo = (id: string): CallInput => ({ id, tool: 'echo', args: {} });
describe('early starts of a grouped submission', () => {
  it('an idempotent call may start before its call.started is stored; a non-idempotent one never does', async () => {
    const { engine, startOf } = setup();
    const run = await engine.submitGrouped({ calls: [echo('e1'), { id: 'w1', tool: 'write', args: { path: '/x', ms: 0 } }] });
    expect((await engine.wait(run.id, 5000))?.status).toBe('succeeded');
    expect(startOf(run.id, 'e1')?.stored).not.toContain('call.started:e1');
    expect(startOf(run.id, 'w1')?.stored).toContain('call.started:w1');
    await engine.close();
  });

  it('once its submission is sent, a call that depends on another starts only once the outcome it depends on is stored', async () => {
    const { engine, startOf } = setup();
    const run = await engine.submitGrouped({
      calls: [
        // Ends after the turn of its submission: the submission is sent without it.
        { id: 'r1', tool: 'read', args: { path: '/a', ms: 0, delayMs: 5 } },
        { id: 'r2', tool: 'read', args: { path: '/b', ms: '${r1.output.ms}' } },
      ],
    });
    expect((await engine.wait(run.id, 5000))?.status).toBe('succeeded');
    expect(startOf(run.id, 'r1')?.stored).toEqual([]);
    expect(startOf(run.id, 'r2')?.stored).toEqual(expect.arrayContaining(['call.succeeded:r1', 'call.started:r2']));
    await engine.close();
  });

  it('before its submission is sent, the idempotent builtin calls that depend on instant ones start at once: the run is one commit', async () => {
    const { sink, engine, startOf } = setup();
    const run = await engine.submitGrouped({
      calls: [
        { id: 'r1', tool: 'read', args: { path: '/a', ms: 0 } },
        { id: 'r2', tool: 'read', args: { path: '/b', ms: '${r1.output.ms}' } },
        { id: 'r3', tool: 'read', args: { path: '/c', ms: '${r2.output.ms}' } },
      ],
    });
    expect(run.status).toBe('succeeded');
    expect(sink.commits).toBe(1);
    for (const id of ['r1', 'r2', 'r3']) expect(startOf(run.id, id)?.stored).toEqual([]);
    // Stored in the order it ran: each outcome before the start of the call that uses it.
    const types = (await sink.store.events(run.id)).map((e) => `${e.type}${e.callId ? `:${e.callId}` : ''}`);
    expect(types.indexOf('call.succeeded:r1')).toBeLessThan(types.indexOf('call.started:r2'));
    expect(types.indexOf('call.succeeded:r2')).toBeLessThan(types.indexOf('call.started:r3'));
    expect(types.at(-1)).toBe('run.completed');
    await engine.close();
  });

  it('a dependent of an HTTP tool waits for the outcome it uses to be stored, even before its submission is sent', async () => {
    // Only builtin tools run ahead of the commit beyond the submission's own starts: one that calls
    // out could see (or show) a run that is not accepted yet.
    const yaml = benchConfigYaml({ tool: {}, maxCallsPerRun: 1000 }).replace(
      'limits:',
      `  - name: fetch
    description: An idempotent HTTP tool
    input: { type: object }
    reads: []
    writes: []
    risk: read
    idempotent: true
    executor: { kind: http, url: "http://127.0.0.1:9/unused" }
limits:`,
    );
    const sink = new SlowSink();
    const executor = recordingExecutor(sink);
    const engine = new Engine({ config: parseConfig(yaml, 'test'), sink, executor });
    const run = await engine.submitGrouped({
      calls: [
        { id: 'f1', tool: 'fetch', args: { n: 1 } },
        { id: 'r1', tool: 'read', args: { path: '/a', ms: 0 } },
        { id: 'f2', tool: 'fetch', args: { from: '${r1.output.ms}' } },
      ],
    });
    expect((await engine.wait(run.id, 5000))?.status).toBe('succeeded');
    const startOf = (callId: string) => executor.starts.find((x) => x.runId === run.id && x.callId === callId);
    // The submission's own idempotent starts go early, whatever their executor.
    expect(startOf('f1')?.stored).toEqual([]);
    expect(startOf('f2')?.stored).toEqual(expect.arrayContaining(['call.succeeded:r1', 'call.started:f2']));
    await engine.close();
  });

  it('a call that is not idempotent waits for the outcome it depends on to be stored, even before its submission is sent', async () => {
    const { engine, startOf } = setup();
    const run = await engine.submitGrouped({
      calls: [
        { id: 'r1', tool: 'read', args: { path: '/a', ms: 0 } },
        { id: 'w1', tool: 'write', args: { path: '/b', ms: '${r1.output.ms}' } },
      ],
    });
    expect((await engine.wait(run.id, 5000))?.status).toBe('succeeded');
    expect(startOf(run.id, 'r1')?.stored).toEqual([]);
    expect(startOf(run.id, 'w1')?.stored).toEqual(expect.arrayContaining(['call.succeeded:r1', 'call.started:w1']));
    await engine.close();
  });

  it('a run of instant idempotent calls is stored whole in one commit, before its submission resolves', async () => {
    const { sink, engine } = setup();
    const run = await engine.submitGrouped({ calls: ['c1', 'c2', 'c3', 'c4', 'c5'].map(echo) });
    expect(run.status).toBe('succeeded');
    expect(sink.commits).toBe(1);
    expect((await sink.store.run(run.id))?.status).toBe('succeeded');
    const stored = await sink.store.events(run.id);
    expect(stored.map((e) => e.seq)).toEqual(stored.map((_, i) => i + 1));
    expect(stored.filter((e) => e.type === 'call.succeeded')).toHaveLength(5);
    await engine.close();
  });

  it('a submission the store refuses leaves nothing: its early attempts are aborted, its limit slots freed', async () => {
    // One read at a time: a slot kept by the refused run would stop every later read.
    const { sink, engine, executor, startOf } = setup({ tool: { read: 1 }, maxCallsPerRun: 1000 });
    await engine.submitGrouped({ calls: [echo('e1')], idempotencyKey: 'k' });
    const refused = engine.submitGrouped({
      runId: 'run_refused',
      idempotencyKey: 'k',
      calls: [
        { id: 'r1', tool: 'read', args: { path: '/a', ms: 0, hold: true } },
        { id: 'w1', tool: 'write', args: { path: '/b', ms: 0 } },
      ],
    });
    const other = engine.submitGrouped({ calls: [echo('e1'), echo('e2')] });
    await expect(refused).rejects.toMatchObject({ code: 'duplicate_idempotency_key' });
    // The idempotent read had started early; the write had not (write-ahead) and never does.
    expect(startOf('run_refused', 'r1')?.signal.aborted).toBe(true);
    expect(startOf('run_refused', 'w1')).toBeUndefined();
    // The run it shared its commit with is stored and ends.
    const ok = await other;
    expect((await engine.wait(ok.id, 5000))?.status).toBe('succeeded');
    expect((await sink.store.run(ok.id))?.status).toBe('succeeded');
    // Nothing of the refused run anywhere.
    expect(engine.has('run_refused')).toBe(false);
    expect(await sink.store.events('run_refused')).toEqual([]);
    await untilTrue(() => engine.runningAttempts() === 0);
    expect(engine.activeRuns()).toBe(0);
    expect(engine.limitUsage().every((u) => u.used === 0)).toBe(true);
    // The read slot is free: a later read runs.
    const later = await engine.submitGrouped({ calls: [{ id: 'r1', tool: 'read', args: { path: '/a', ms: 0 } }] });
    expect((await engine.wait(later.id, 5000))?.status).toBe('succeeded');
    expect(executor.starts.filter((s) => s.runId === 'run_refused')).toHaveLength(1);
    await engine.close();
  });

  it('a submission refused by a commit of its own (submit) leaves no run behind either', async () => {
    const { engine } = setup({ tool: { read: 1 }, maxCallsPerRun: 1000 });
    await engine.submit({ calls: [echo('e1')], idempotencyKey: 'k' });
    await expect(
      engine.submit({ runId: 'run_refused', idempotencyKey: 'k', calls: [{ id: 'r1', tool: 'read', args: { path: '/a', ms: 0 } }] }),
    ).rejects.toThrow(/idempotency key/);
    expect(engine.has('run_refused')).toBe(false);
    await untilTrue(() => engine.activeRuns() === 0);
    expect(engine.limitUsage().every((u) => u.used === 0)).toBe(true);
    await engine.close();
  });

  it('a cancel that comes before the commit still stops the attempts started early', async () => {
    const { sink, engine, startOf } = setup();
    const submitted = engine.submitGrouped({
      runId: 'run_c',
      calls: [{ id: 'r1', tool: 'read', args: { path: '/a', ms: 0, hold: true } }, echo('e1')],
    });
    expect(startOf('run_c', 'r1')).toBeDefined();
    void engine.cancel('run_c');
    await submitted;
    const view = await engine.wait('run_c', 5000);
    expect(view?.status).toBe('cancelled');
    expect(startOf('run_c', 'r1')?.signal.aborted).toBe(true);
    expect((await sink.store.run('run_c'))?.status).toBe('cancelled');
    await engine.close();
  });
});
