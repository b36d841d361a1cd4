/**
 * `outcome_unknown` (DESIGN §4 Timeouts): the one classification of an attempt's end (core/outcome.ts)
 * as the scheduler applies it. A non-idempotent tool's attempt that was sent and got no answer (a
 * timeout, a lost connection, a process that died) fails `outcome_unknown` and is not retried; an
 * idempotent tool's keeps its error and is retried; other failures are untouched.
 */
import { describe, expect, it } from 'vitest';
import { callError } from '../../src/core/errors.js';
import { attemptOutcome, lostAttempt, type AttemptFailure } from '../../src/core/outcome.js';
import { Scheduler, type AttemptResult } from '../../src/core/scheduler.js';
import { catalogOf, DEFAULTS, limits, tool } from '../helpers/sched.js';

const timeout: AttemptFailure = { ok: false, error: callError('timeout', 'timed out after 50 ms'), retryable: true };
const lost: AttemptFailure = { ok: false, error: callError('tool_error', 'socket hang up'), retryable: true, unanswered: true };
const refused: AttemptFailure = { ok: false, error: callError('tool_error', 'ECONNREFUSED'), retryable: true };
const http500: AttemptFailure = { ok: false, error: callError('tool_error', 'HTTP 500'), retryable: true };

describe('attemptOutcome', () => {
  it.each([
    ['a timeout', timeout, 'timeout'],
    ['a connection lost after sending', lost, 'tool_error'],
  ])('%s of a non-idempotent tool is outcome_unknown, not retryable, naming the cause', (_name, r, cause) => {
    const out = attemptOutcome(r, false, 'c1');
    expect(out).toMatchObject({ ok: false, retryable: false, error: { code: 'outcome_unknown', details: { cause } } });
    expect(out.error.message).toContain('c1');
  });

  it.each([
    ['a timeout', timeout],
    ['a lost connection', lost],
  ])('%s of an idempotent tool keeps its error', (_name, r) => {
    expect(attemptOutcome(r, true, 'c1')).toBe(r);
  });

  it('an answer (an HTTP error) or a request never sent (connection refused) keeps its error', () => {
    expect(attemptOutcome(http500, false, 'c1')).toBe(http500);
    expect(attemptOutcome(refused, false, 'c1')).toBe(refused);
  });

  it('a call running when its process died is outcome_unknown', () => {
    expect(lostAttempt('c1')).toMatchObject({ code: 'outcome_unknown', details: { cause: 'interrupted' } });
  });
});

describe('the scheduler', () => {
  function scheduler(): Scheduler {
    return new Scheduler({
      catalog: catalogOf([
        tool('send_mail', { reads: [], writes: [] }),
        tool('read_page', {
          reads: [],
          writes: [],
          risk: 'read',
          idempotent: true,
          retry: { attempts: 3, backoffMs: 10, maxBackoffMs: 10 },
        } as never),
      ]),
      policy: { rules: [] },
      limits: limits(),
      defaults: DEFAULTS,
    });
  }

  function end(s: Scheduler, now: number, callId: string, attempt: number, result: AttemptResult) {
    return s.attemptEnded(now, { runId: 'r', callId, attempt, result });
  }

  it('fails a timed-out non-idempotent call outcome_unknown and retries a timed-out idempotent one', () => {
    const s = scheduler();
    const out = s.submit(0, {
      runId: 'r',
      tenant: 't',
      calls: [
        { id: 'mail', tool: 'send_mail', args: {} },
        { id: 'page', tool: 'read_page', args: {} },
      ],
    });
    expect(out.starts.map((x) => x.callId).sort()).toEqual(['mail', 'page']);
    const a = end(s, 50, 'mail', 1, timeout);
    const failed = a.events.find((e) => e.type === 'call.failed' && e.callId === 'mail');
    expect(failed?.data).toMatchObject({ error: { code: 'outcome_unknown', details: { cause: 'timeout' } }, attempt: 1 });
    const b = end(s, 50, 'page', 1, timeout);
    expect(b.events.find((e) => e.callId === 'page')?.type).toBe('call.retry_scheduled');
    expect(b.events.some((e) => e.type === 'call.failed')).toBe(false);
  });
});
