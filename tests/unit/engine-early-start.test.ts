/**
 * Early starts (src/engine/engine.ts, `startsEarly`): a grouped submission starts its idempotent calls
 * before its events are stored, so that a run of instant calls needs one commit; every other attempt
 * keeps write-ahead (its `call.started`, and the outcomes it depends on, are stored before it starts).
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
import type { PendingAppend } from '../../src/store/types.js';
import { benchConfig } from '../../src/bench/workloads.js';
import { untilTrue } from '../helpers/wait.js';

/** Commits each `appendAsync` batch 3 ms later (or at once, on `wait`), in order; several may be in flight. */
class SlowSink implements EventSink {
  readonly store = createMemoryStore();
  commits = 0;
  private readonly inFlight: (() => void)[] = [];

  append(events: readonly RunEvent[]): void {
    for (const settle of [...this.inFlight]) settle();
    this.store.append(events);
  }

  appendAsync(events: readonly RunEvent[]): PendingAppend {
    this.commits++;
    let outcome: { err?: unknown } | undefined;
    let resolve!: () => void;
    let reject!: (err: unknown) => void;
    const done = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    done.catch(() => {});
    const settle = () => {
      if (outcome) return;
      // The ones before it first: batches are stored in the order they came.
      for (const earlier of this.inFlight.slice(0, this.inFlight.indexOf(settle))) earlier();
      this.inFlight.splice(this.inFlight.indexOf(settle), 1);
      try {
        this.store.append(events);
        outcome = {};
        resolve();
      } catch (err) {
        outcome = { err };
        reject(err);
      }
    };
    this.inFlight.push(settle);
    setTimeout(settle, 3);
    return {
      done,
      wait: () => {
        settle();
        if (outcome?.err) throw outcome.err;
      },
    };
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

/** Answers at once with the args as output; a call with `hold: true` waits until aborted. */
function recordingExecutor(sink: SlowSink): Executor & { starts: Start[] } {
  const starts: Start[] = [];
  return {
    starts,
    async execute(r: ExecuteRequest): Promise<ExecuteResult> {
      starts.push({ runId: r.runId, callId: r.callId, tool: r.tool.name, stored: sink.store.events(r.runId).map((e) => `${e.type}${e.callId ? `:${e.callId}` : ''}`), signal: r.signal });
      if (r.args.hold === true) {
        await new Promise((resolve) => (r.signal.aborted ? resolve(undefined) : r.signal.addEventListener('abort', resolve, { once: true })));
        return { ok: false, error: { code: 'cancelled', message: 'aborted' }, retryable: false };
      }
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

  it('a call that depends on another starts only once the outcome it depends on is stored', async () => {
    const { engine, startOf } = setup();
    const run = await engine.submitGrouped({
      calls: [
        { id: 'r1', tool: 'read', args: { path: '/a', ms: 0 } },
        { id: 'r2', tool: 'read', args: { path: '/b', ms: '${r1.output.ms}' } },
      ],
    });
    expect((await engine.wait(run.id, 5000))?.status).toBe('succeeded');
    expect(startOf(run.id, 'r1')?.stored).toEqual([]);
    expect(startOf(run.id, 'r2')?.stored).toEqual(expect.arrayContaining(['call.succeeded:r1', 'call.started:r2']));
    await engine.close();
  });

  it('a run of instant idempotent calls is stored whole in one commit, before its submission resolves', async () => {
    const { sink, engine } = setup();
    const run = await engine.submitGrouped({ calls: ['c1', 'c2', 'c3', 'c4', 'c5'].map(echo) });
    expect(run.status).toBe('succeeded');
    expect(sink.commits).toBe(1);
    expect(sink.store.run(run.id)?.status).toBe('succeeded');
    const stored = sink.store.events(run.id);
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
    expect(sink.store.run(ok.id)?.status).toBe('succeeded');
    // Nothing of the refused run anywhere.
    expect(engine.has('run_refused')).toBe(false);
    expect(sink.store.events('run_refused')).toEqual([]);
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
    engine.submit({ calls: [echo('e1')], idempotencyKey: 'k' });
    expect(() => engine.submit({ runId: 'run_refused', idempotencyKey: 'k', calls: [{ id: 'r1', tool: 'read', args: { path: '/a', ms: 0 } }] })).toThrow(/idempotency key/);
    expect(engine.has('run_refused')).toBe(false);
    await untilTrue(() => engine.activeRuns() === 0);
    expect(engine.limitUsage().every((u) => u.used === 0)).toBe(true);
    await engine.close();
  });

  it('a cancel that comes before the commit still stops the attempts started early', async () => {
    const { sink, engine, startOf } = setup();
    const submitted = engine.submitGrouped({ runId: 'run_c', calls: [{ id: 'r1', tool: 'read', args: { path: '/a', ms: 0, hold: true } }, echo('e1')] });
    expect(startOf('run_c', 'r1')).toBeDefined();
    engine.cancel('run_c');
    await submitted;
    const view = await engine.wait('run_c', 5000);
    expect(view?.status).toBe('cancelled');
    expect(startOf('run_c', 'r1')?.signal.aborted).toBe(true);
    expect(sink.store.run('run_c')?.status).toBe('cancelled');
    await engine.close();
  });
});
