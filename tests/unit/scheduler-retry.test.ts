// Retries (DESIGN §6): only idempotent tools with `retry`, only retryable errors, at most `attempts`
// attempts in all, after the deterministic backoff of retry.ts (or a longer `retryAfterMs`).
import { describe, expect, it } from 'vitest';
import { backoffDelay } from '../../src/core/retry.js';
import type { RetryPolicy } from '../../src/core/tool.js';
import { PURE, ends, finalStatuses, illegalMoves, rig, runStatus, starts, tool } from '../helpers/sched.js';

const retry: RetryPolicy = { attempts: 3, backoffMs: 100, maxBackoffMs: 150 };
const tools = [
  tool('flaky', { ...PURE, idempotent: true, retry }),
  tool('once', { ...PURE, idempotent: false, retry }), // retry on a non-idempotent tool: never used
  tool('noretry', { ...PURE, idempotent: true }),
  tool('pure', PURE),
];
const d = (callId: string, failed: number, runId = 'r1') => backoffDelay(retry, runId, callId, failed);

describe('backoffDelay', () => {
  it('is exponential, capped, with equal jitter in [base/2, base) that depends only on run, call and attempt', () => {
    for (const [attempt, base] of [
      [1, 100],
      [2, 150],
      [3, 150],
    ] as const) {
      const v = backoffDelay(retry, 'r1', 'c', attempt);
      expect(v).toBeGreaterThanOrEqual(base / 2);
      expect(v).toBeLessThan(base);
      expect(backoffDelay(retry, 'r1', 'c', attempt)).toBe(v);
    }
  });
});

describe('retry', () => {
  it('re-runs a retryable failure after the backoff and succeeds on the third attempt', () => {
    const r = rig({ tools });
    r.submit(0, { calls: [{ id: 'c', tool: 'flaky', args: { ms: 10, fail: 2, retryable: true } }] });
    r.run();
    const s2 = 10 + d('c', 1);
    const s3 = s2 + 10 + d('c', 2);
    expect(starts(r.events)).toEqual(['0 c', `${s2} c`, `${s3} c`]);
    expect(ends(r.events)).toEqual(['10 c retry', `${s2 + 10} c retry`, `${s3 + 10} c ok`]);
    const scheduled = r.events.filter((e) => e.type === 'call.retry_scheduled').map((e) => e.data);
    expect(scheduled).toMatchObject([
      { attempt: 2, at: s2, delayMs: d('c', 1), error: { code: 'tool_error' } },
      { attempt: 3, at: s3, delayMs: d('c', 2), error: { code: 'tool_error' } },
    ]);
    expect(r.events.filter((e) => e.type === 'call.started').map((e) => e.data.attempt)).toEqual([1, 2, 3]);
    expect(r.events.find((e) => e.type === 'call.succeeded')?.data).toMatchObject({ attempt: 3, durationMs: 10 });
    expect(runStatus(r.events)).toBe('succeeded');
    expect(illegalMoves(r.events)).toEqual([]);
  });

  it('gives up after `attempts` attempts in all', () => {
    const r = rig({ tools });
    r.submit(0, { calls: [{ id: 'c', tool: 'flaky', args: { ms: 10, fail: 'always', retryable: true } }] });
    r.run();
    const s2 = 10 + d('c', 1);
    const s3 = s2 + 10 + d('c', 2);
    expect(ends(r.events)).toEqual(['10 c retry', `${s2 + 10} c retry`, `${s3 + 10} c failed`]);
    expect(r.events.find((e) => e.type === 'call.failed')?.data).toMatchObject({ attempt: 3, error: { code: 'tool_error' } });
    expect(runStatus(r.events)).toBe('failed');
  });

  it('jitter differs per call: two calls failing together come back at their own times', () => {
    const r = rig({ tools });
    r.submit(0, {
      runId: 'run_x',
      calls: [
        { id: 'a', tool: 'flaky', args: { ms: 10, fail: 1, retryable: true } },
        { id: 'b', tool: 'flaky', args: { ms: 10, fail: 1, retryable: true } },
      ],
    });
    r.run();
    const [da, db] = [d('a', 1, 'run_x'), d('b', 1, 'run_x')];
    expect(da).not.toBe(db);
    const expected = [
      ['a', 10 + da],
      ['b', 10 + db],
    ].sort((x, y) => (x[1] as number) - (y[1] as number));
    expect(starts(r.events).slice(2)).toEqual(expected.map(([id, at]) => `${at} ${id}`));
  });

  it('does not retry a non-idempotent tool, even one that declares retry', () => {
    const r = rig({ tools });
    r.submit(0, { calls: [{ id: 'c', tool: 'once', args: { ms: 10, fail: 1, retryable: true } }] });
    r.run();
    expect(ends(r.events)).toEqual(['10 c failed']);
  });

  it('does not retry an idempotent tool without retry', () => {
    const r = rig({ tools });
    r.submit(0, { calls: [{ id: 'c', tool: 'noretry', args: { ms: 10, fail: 1, retryable: true } }] });
    r.run();
    expect(ends(r.events)).toEqual(['10 c failed']);
  });

  it('does not retry an error that is not retryable', () => {
    const r = rig({ tools });
    r.submit(0, { calls: [{ id: 'c', tool: 'flaky', args: { ms: 10, fail: 1 } }] });
    r.run();
    expect(ends(r.events)).toEqual(['10 c failed']);
    expect(starts(r.events)).toEqual(['0 c']);
  });

  it('honours a Retry-After longer than the backoff, and keeps the backoff when it is shorter', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'late', tool: 'flaky', args: { ms: 10, fail: 1, retryable: true, retryAfterMs: 5000 } },
        { id: 'soon', tool: 'flaky', args: { ms: 10, fail: 1, retryable: true, retryAfterMs: 1 } },
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 late', '0 soon', `${10 + d('soon', 1)} soon`, '5010 late']);
    expect(r.events.filter((e) => e.type === 'call.retry_scheduled').map((e) => [e.callId, e.data.delayMs])).toEqual([
      ['late', 5000],
      ['soon', d('soon', 1)],
    ]);
  });

  it('a call waiting for its backoff holds no limit: another call of the tool runs meanwhile', () => {
    const r = rig({ tools, limits: { tool: { flaky: 1 } } });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 'flaky', args: { ms: 10, fail: 1, retryable: true } },
        { id: 'b', tool: 'flaky', args: { ms: 100 } },
      ],
    });
    r.run();
    const back = 10 + d('a', 1);
    expect(back).toBeLessThan(110);
    // a's retry is due before b ends: it waits for the tool's only slot.
    expect(starts(r.events)).toEqual(['0 a', '10 b', '110 a']);
  });

  it('a data successor of a retried call starts only after the attempt that succeeded', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 'flaky', args: { ms: 10, fail: 1, retryable: true, out: { v: 7 } } },
        { id: 'b', tool: 'pure', args: { x: '${a.output.v}' } },
      ],
    });
    r.run();
    const s2 = 10 + d('a', 1);
    expect(starts(r.events)).toEqual(['0 a', `${s2} a`, `${s2 + 10} b`]);
    expect(r.sim.starts[2]?.start.args).toEqual({ x: 7 });
    expect(finalStatuses(r.events)).toEqual({ a: 'succeeded', b: 'succeeded' });
  });
});
