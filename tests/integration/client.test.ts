/**
 * The typed client against a real server (in process, SQLite, 127.0.0.1:0): submit and wait, event
 * streams that resume by themselves when the connection is cut, and 429 answers retried after
 * Retry-After (the run that fills the tenant's slot holds its call at a ToolServer until released).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ToolgraphClient, ToolgraphError, type RunEvent } from '../../src/client/index.js';
import { closeAll, startApi, startToolApi } from '../helpers/server.js';

const YAML = `
tools:
  - { name: sleep, reads: [], writes: [], idempotent: true, executor: { kind: builtin, name: sleep } }
  - { name: echo, reads: [], writes: [], idempotent: true, executor: { kind: builtin, name: echo } }
limits: { maxActiveRunsPerTenant: 1 }
`;

afterEach(closeAll);

describe('ToolgraphClient', () => {
  it('submits and waits until the run ends, results in submission order', async () => {
    const api = await startApi({ yaml: YAML });
    const tg = new ToolgraphClient({ baseUrl: api.url });
    const run = await tg.submit(
      {
        calls: [
          { id: 'slow', tool: 'sleep', args: { ms: 150 } },
          { id: 'fast', tool: 'echo', args: { x: '${slow.output.ms}' } },
        ],
      },
      { wait: true },
    );
    expect(run.status).toBe('succeeded');
    expect(run.calls.map((c) => [c.id, c.output])).toEqual([
      ['slow', { ms: 150 }],
      ['fast', { x: 150 }],
    ]);
  });

  it('throws a ToolgraphError with the code and status of an error answer', async () => {
    const api = await startApi({ yaml: YAML });
    const tg = new ToolgraphClient({ baseUrl: api.url });
    const err = await tg.get('run_nope').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ToolgraphError);
    expect(err).toMatchObject({ status: 404, code: 'not_found' });
  });

  it('submits with a concurrencyKey: reject is a ToolgraphError concurrent_run naming the run that holds the key', async () => {
    const api = await startApi({ yaml: YAML });
    const tg = new ToolgraphClient({ baseUrl: api.url });
    const first = await tg.submit({
      calls: [{ id: 's', tool: 'sleep', args: { ms: 2000 } }],
      concurrencyKey: 'conv',
      onConcurrent: 'reject',
    });
    const err = await tg
      .submit({ calls: [{ id: 'e', tool: 'echo', args: {} }], concurrencyKey: 'conv', onConcurrent: 'reject' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ToolgraphError);
    expect(err).toMatchObject({ status: 409, code: 'concurrent_run', details: { runId: first.id } });
    await api.service.cancel({ role: 'operator', tenant: 'default' } as never, first.id);
  });

  it('submits with a priority: the run carries it; one more urgent than the key may ask is a ToolgraphError priority_not_allowed', async () => {
    const api = await startApi({
      yaml: `${YAML}auth:\n  keys:\n    - { key: capped-agent-key, tenant: acme, role: agent, maxPriority: 2 }\n`,
    });
    const tg = new ToolgraphClient({ baseUrl: api.url, apiKey: 'capped-agent-key' });
    const err = await tg.submit({ calls: [{ id: 'e', tool: 'echo', args: {} }], priority: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ToolgraphError);
    expect(err).toMatchObject({ status: 403, code: 'priority_not_allowed', details: { maxPriority: 2, priority: 1 } });
    const run = await tg.submit({ calls: [{ id: 'e', tool: 'echo', args: {} }], priority: 2 }, { wait: true });
    expect(run).toMatchObject({ status: 'succeeded', priority: 2 });
    // The same batch planned: what only a run has is left out of the plan's request.
    const plan = await tg.plan({ calls: [{ id: 'e', tool: 'echo', args: {} }], priority: 2, concurrencyKey: 'k' });
    expect(plan.generations).toEqual([['e']]);
  });

  it('resumes an event stream after the connection is cut: every event once, in order', async () => {
    // The calls are held at a ToolServer and released one by one from the loop, so the run is still
    // going when the stream is cut: the cut hits the live stream, never a connection that already
    // ended (which the client would not need to resume, and which the pool would hand out again).
    const { ts, api } = await startToolApi();
    const asked: string[] = [];
    const watched: typeof fetch = (input, init) => {
      const h = (init?.headers ?? {}) as Record<string, string>;
      if (String(input).endsWith('/events')) asked.push(h['last-event-id'] ?? '');
      return fetch(input, init);
    };
    const tg = new ToolgraphClient({ baseUrl: api.url, retryBaseMs: 10, fetch: watched });
    const calls = Array.from({ length: 6 }, (_, i) => ({ id: `s${i}`, tool: 'work', args: { hold: true } }));
    const run = await tg.submit({ calls });
    const release = async (i: number) => (await ts.call(`s${i}`, run.id)).respond();
    await release(0);
    const seen: RunEvent[] = [];
    const cutAt: number[] = [];
    for await (const e of tg.events(run.id)) {
      seen.push(e);
      if (e.type !== 'call.succeeded') continue;
      // Cut every open connection (the stream's too) after the first and the fourth call.succeeded.
      if (e.callId === 's0' || e.callId === 's3') {
        api.app.server.closeAllConnections();
        cutAt.push(e.seq);
      }
      const i = Number(e.callId?.slice(1));
      if (i < 5) await release(i + 1);
    }
    // One stream, then one resumed after each cut, from the last event seen.
    expect(asked).toEqual(['0', String(cutAt[0]), String(cutAt[1])]);
    const seqs = seen.map((e) => e.seq);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
    expect(seen.filter((e) => e.type === 'call.succeeded').map((e) => e.callId)).toEqual(['s0', 's1', 's2', 's3', 's4', 's5']);
    expect(seen.at(-1)?.type).toBe('run.completed');
    const stored = await api.get(`/v1/runs/${run.id}/events`);
    expect(stored.text.match(/^id: /gm)?.length).toBe(seqs.length);
  });

  it('starts from a given seq', async () => {
    const api = await startApi({ yaml: YAML });
    const tg = new ToolgraphClient({ baseUrl: api.url });
    const run = await tg.submit({ calls: [{ id: 'a', tool: 'echo' }] }, { wait: true });
    const all: number[] = [];
    for await (const e of tg.events(run.id, { from: 3 })) all.push(e.seq);
    expect(all[0]).toBe(4);
    expect(all.at(-1)).toBeGreaterThan(4);
  });

  it('retries a 429 after Retry-After, then succeeds once the tenant has room', async () => {
    const { ts, api } = await startToolApi({ limits: '{ maxActiveRunsPerTenant: 1 }' });
    // The first run holds its call at the tool server until the client has been refused once.
    const answers: number[] = [];
    let onAnswer = (_status: number) => {};
    const watched: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      answers.push(res.status);
      onAnswer(res.status);
      return res;
    };
    const tg = new ToolgraphClient({ baseUrl: api.url, fetch: watched });
    const first = await tg.submit({ calls: [{ id: 'hold', tool: 'work', args: { hold: true } }] });
    expect(first.status).toBe('running');
    const held = await ts.call('hold', first.id);
    // The raw API refuses a second active run now...
    const refused = await api.post('/v1/runs', { calls: [{ id: 'b', tool: 'echo' }] });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    // ...and the client waits as told and gets through once the first run has ended.
    answers.length = 0;
    onAnswer = (status) => {
      if (status === 429 && !held.answered) held.respond();
    };
    const t0 = Date.now();
    const second = await tg.submit({ calls: [{ id: 'b', tool: 'echo' }] }, { wait: true });
    expect(second.status).toBe('succeeded');
    expect(answers[0]).toBe(429);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    expect((await tg.get(first.id)).status).toBe('succeeded');
  });

  it('gives up on 429 after maxRetries', async () => {
    const { api } = await startToolApi({ limits: '{ maxActiveRunsPerTenant: 1 }' });
    const tg = new ToolgraphClient({ baseUrl: api.url, maxRetries: 0 });
    await tg.submit({ calls: [{ id: 'hold', tool: 'work', args: { hold: true } }] });
    await expect(tg.submit({ calls: [{ id: 'b', tool: 'echo' }] })).rejects.toMatchObject({ status: 429, code: 'too_many_runs' });
  });
});
