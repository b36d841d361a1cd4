/**
 * Admission (api/admission.ts) and the error table (api/errors.ts), as pure functions: each rule
 * refuses with its code and status, in the documented order, and lets through what is at the limit.
 */
import { describe, expect, it } from 'vitest';
import type { RunView } from '../../src/core/view.js';
import { SchedulerError } from '../../src/core/scheduler.js';
import { StoreError } from '../../src/store/errors.js';
import { admit, type Admission } from '../../src/api/admission.js';
import { ApiError, httpErrorOf } from '../../src/api/errors.js';
import { API_ERRORS } from '../../src/contract/errors.js';

const calls = (...ids: string[]) => ids.map((id) => ({ id, tool: 'echo' }));

function run(over: Partial<RunView> = {}): RunView {
  return {
    id: 'r1',
    tenant: 't',
    status: 'running',
    failure: 'partial',
    tags: {},
    createdAt: '',
    endedAt: null,
    calls: [],
    diagnostics: [],
    ...over,
  };
}
const withCalls = (...ids: string[]) => calls(...ids).map((c) => ({ ...c, status: 'succeeded' })) as unknown as RunView['calls'];

/** The code and status `admit` refuses with, or `ok`. */
function verdict(a: Admission, limits: { maxCallsPerRun: number; maxActiveRunsPerTenant?: number }) {
  try {
    admit(a, limits);
    return 'ok';
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    return `${e.status} ${e.code}: ${e.message}`;
  }
}

describe('admit', () => {
  const limits = { maxCallsPerRun: 3, maxActiveRunsPerTenant: 2 };

  it('a new run: at most maxCallsPerRun calls (413), then room for the tenant (429 with Retry-After)', () => {
    expect(verdict({ kind: 'submit', tenant: 't', calls: calls('a', 'b', 'c'), activeRuns: () => 1 }, limits)).toBe('ok');
    expect(verdict({ kind: 'submit', tenant: 't', calls: calls('a', 'b', 'c', 'd'), activeRuns: () => 0 }, limits)).toBe(
      '413 payload_too_large: a run takes at most 3 calls (limits.maxCallsPerRun), got 4',
    );
    expect(verdict({ kind: 'submit', tenant: 't', calls: calls('a'), activeRuns: () => 2 }, limits)).toBe(
      '429 too_many_runs: tenant t has 2 active runs (limits.maxActiveRunsPerTenant); retry later',
    );
    // Too many calls is decided first.
    expect(verdict({ kind: 'submit', tenant: 't', calls: calls('a', 'b', 'c', 'd'), activeRuns: () => 2 }, limits)).toMatch(/^413/);
    let refused: unknown;
    try {
      admit({ kind: 'submit', tenant: 't', calls: calls('a'), activeRuns: () => 2 }, limits);
    } catch (e) {
      refused = e;
    }
    expect(refused).toMatchObject({ headers: { 'retry-after': '1' }, details: { tenant: 't', active: 2 } });
    // Without a cap the active runs are not even counted.
    expect(
      verdict(
        {
          kind: 'submit',
          tenant: 't',
          calls: calls('a'),
          activeRuns: () => {
            throw new Error('counted');
          },
        },
        { maxCallsPerRun: 3 },
      ),
    ).toBe('ok');
  });

  it('an append: the run is open (409), the calls fit with those it has (413), their ids are new to it (409)', () => {
    const open = run({ stream: 'open', calls: withCalls('a', 'b') });
    expect(verdict({ kind: 'append', run: open, calls: calls('c') }, limits)).toBe('ok');
    expect(verdict({ kind: 'append', run: run(), calls: calls('c') }, limits)).toBe(
      '409 conflict: run r1 was not opened with "open": true',
    );
    expect(verdict({ kind: 'append', run: run({ stream: 'sealed' }), calls: calls('c') }, limits)).toBe(
      '409 conflict: run r1 is sealed; it takes no more calls',
    );
    expect(verdict({ kind: 'append', run: run({ stream: 'open', status: 'cancelled' }), calls: calls('c') }, limits)).toBe(
      '409 conflict: run r1 is cancelled; it takes no more calls',
    );
    expect(verdict({ kind: 'append', run: open, calls: calls('c', 'd') }, limits)).toBe(
      '413 payload_too_large: a run takes at most 3 calls (limits.maxCallsPerRun), got 4',
    );
    expect(verdict({ kind: 'append', run: open, calls: calls('b') }, limits)).toBe('409 conflict: call id b is used in run r1 already');
  });

  it('a replan: the run needs one (409), the calls fit (413), their ids are new to the run (409); no tenant cap', () => {
    const waiting = run({ status: 'needs_replan', calls: withCalls('a') });
    expect(verdict({ kind: 'replan', run: waiting, calls: calls('b', 'c') }, limits)).toBe('ok');
    expect(verdict({ kind: 'replan', run: run({ calls: withCalls('a') }), calls: calls('b') }, limits)).toBe(
      '409 conflict: run r1 is running; only a needs_replan run takes a replan',
    );
    expect(verdict({ kind: 'replan', run: waiting, calls: calls('b', 'c', 'd') }, limits)).toMatch(/^413 payload_too_large: .*got 4$/);
    expect(verdict({ kind: 'replan', run: waiting, calls: calls('b', 'a') }, limits)).toBe(
      '409 conflict: call id a is used in run r1 already',
    );
  });
});

describe('httpErrorOf: one table for every error', () => {
  const answer = (e: unknown) => {
    const a = httpErrorOf(e);
    return [a.status, a.body.error.code, a.body.error.message, a.unexpected];
  };

  it('answers an ApiError from the catalog, with its headers', () => {
    for (const code of Object.keys(API_ERRORS) as (keyof typeof API_ERRORS)[]) {
      expect(httpErrorOf(new ApiError(code, 'm')).status).toBe(API_ERRORS[code]);
    }
    expect(httpErrorOf(new ApiError('too_many_runs', 'm', { n: 1 }, { 'retry-after': '1' }))).toEqual({
      status: 429,
      body: { error: { code: 'too_many_runs', message: 'm', details: { n: 1 } } },
      headers: { 'retry-after': '1' },
      unexpected: false,
    });
  });

  it("translates the scheduler's and the store's codes; their other codes are a logged 500", () => {
    expect(answer(new SchedulerError('run_not_found', 'no run x'))).toEqual([404, 'not_found', 'no run x', false]);
    expect(answer(new SchedulerError('call_not_found', 'no call y'))).toEqual([404, 'not_found', 'no call y', false]);
    expect(answer(new SchedulerError('conflict', 'c'))).toEqual([409, 'conflict', 'c', false]);
    expect(answer(new SchedulerError('invalid_args', 'bad'))).toEqual([400, 'invalid_args', 'bad', false]);
    expect(answer(new StoreError('invalid_cursor', 'cur'))).toEqual([400, 'invalid_cursor', 'cur', false]);
    expect(answer(new StoreError('invalid_limit', 'lim'))).toEqual([400, 'invalid_request', 'lim', false]);
    expect(answer(new StoreError('seq_out_of_order', 'secret detail'))).toEqual([
      500,
      'internal',
      'an unexpected error occurred; it has been logged',
      true,
    ]);
  });

  it("translates Fastify's codes, keeps its other 4xx statuses, and hides anything else behind a 500", () => {
    const fastify = (code: string, statusCode: number) => Object.assign(new Error('f'), { code, statusCode });
    expect(answer(fastify('FST_ERR_CTP_INVALID_JSON_BODY', 400))).toEqual([400, 'invalid_json', 'f', false]);
    expect(answer(fastify('FST_ERR_CTP_BODY_TOO_LARGE', 413))).toEqual([413, 'payload_too_large', 'f', false]);
    expect(answer(fastify('FST_ERR_SOMETHING_NEW', 431))).toEqual([431, 'invalid_request', 'f', false]);
    expect(answer(new TypeError('x is undefined'))).toEqual([500, 'internal', 'an unexpected error occurred; it has been logged', true]);
  });
});
