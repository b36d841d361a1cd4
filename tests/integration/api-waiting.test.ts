/**
 * Why a call waits (DESIGN §7, issue #21), with real runs: a real server on 127.0.0.1, a SQLite file,
 * http tools on a real tool server that hold their requests until the test answers them. A waiting
 * call names the lock or limit and who holds it (`waitingFor`, `call.waiting`); `GET /v1/limits`
 * shows every limit in use to an operator (403 for an agent); an agent never sees another tenant's
 * run ids; the wait is gone once the call starts; the metrics count waits by kind.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeAll, expectApiError, sse, startApi, type Api } from '../helpers/server.js';
import { ToolServer } from '../helpers/toolserver.js';
import { ACME, callOf, GLOBEX, ISO, OPS, submitAs, waitingYaml } from '../helpers/waiting.js';

/** The waiting tests' config, with a second reader of `file:*` that is idempotent. */
const yaml = (ts: ToolServer) =>
  waitingYaml(
    ts,
    `  - name: run_tests_idem
    input: { type: object }
    reads: ["file:*"]
    writes: []
    risk: read
    idempotent: true
    executor: { kind: http, url: "${ts.url('/tests')}" }
`,
  );

describe('waitingFor on real runs', () => {
  let ts: ToolServer;
  let api: Api;

  beforeAll(async () => {
    ts = await ToolServer.start();
    api = await startApi({ yaml: yaml(ts) });
  });

  afterAll(async () => {
    await closeAll();
    await ts.close();
  });

  const submit = (token: string, calls: unknown[]) => submitAs(api, token, calls);
  const call = (runId: string, callId: string, token = OPS) => callOf(api, runId, callId, token);

  it('a lock wait names the lock and its holder (run, call, since); the wait is gone once the call starts', async () => {
    ts.on('/tests', () => 'hold');
    const a = await submit(ACME, [{ id: 'tests', tool: 'run_tests', args: {} }]);
    const held = await ts.call('tests', a.id);
    const b = await submit(ACME, [{ id: 'write', tool: 'write_file', args: { path: '/repo/a.ts' } }]);
    // Stored with the run's first step: the answer to the submission says it already.
    expect(b.calls[0]).toMatchObject({ status: 'ready', waitingFor: [{ kind: 'lock', key: 'file:*', domain: 'tenant:acme' }] });
    const waiting = await call(b.id, 'write', ACME);
    expect(waiting.status).toBe('ready');
    expect(waiting.waitingFor).toEqual([
      {
        kind: 'lock',
        key: 'file:*',
        domain: 'tenant:acme',
        holders: [{ runId: a.id, callId: 'tests', tenant: 'acme', since: expect.stringMatching(ISO) }],
      },
    ]);
    expect(Date.parse(waiting.waitingFor[0].holders[0].since)).toBe(Date.parse((await call(a.id, 'tests')).startedAt));

    // The operator's view of every limit in use; an agent may not see it.
    const limits = await api.get('/v1/limits', { token: OPS });
    expect(limits.status).toBe(200);
    expect(limits.body.items).toContainEqual({
      kind: 'lock',
      key: 'file:*',
      domain: 'tenant:acme',
      inUse: 1,
      waiting: 1,
      longestWaitMs: expect.any(Number),
      holders: [{ runId: a.id, callId: 'tests', tenant: 'acme', since: expect.stringMatching(ISO) }],
    });
    expectApiError(await api.get('/v1/limits', { token: ACME }), 403, 'forbidden');
    const metrics = await api.get('/metrics', { token: OPS });
    expect(metrics.text).toContain('toolgraph_limit_waiting{kind="lock",limit=""} 1');

    held.respond({ status: 200, body: { ok: true } });
    const done = await api.settled(b.id, OPS);
    expect(done.status).toBe('succeeded');
    expect(done.calls[0]).not.toHaveProperty('waitingFor');
    const events = (await sse(`${api.url}/v1/runs/${b.id}/events`, { authorization: `Bearer ${OPS}` }).then((s) => s.ended)).map(
      (e) => e.event,
    );
    expect(events).toEqual(['run.created', 'run.started', 'call.ready', 'call.waiting', 'call.started', 'call.succeeded', 'run.completed']);
    const after = await api.get('/metrics', { token: OPS });
    expect(after.text).toMatch(/toolgraph_limit_wait_seconds_count\{kind="lock"\} 1\n/);
    expect((await api.get('/v1/limits', { token: OPS })).body.items.filter((l: any) => l.kind === 'lock')).toEqual([]);
  });

  it("a tool-limit wait names its holders with limit and inUse; an agent sees only its own tenant's holders", async () => {
    ts.on('/deploy', () => 'hold');
    const a = await submit(ACME, [{ id: 'd', tool: 'deploy', args: {} }]);
    const held = await ts.call('d', a.id);
    const g = await submit(GLOBEX, [{ id: 'd', tool: 'deploy', args: {} }]);
    const a2 = await submit(ACME, [{ id: 'd2', tool: 'deploy', args: {} }]);

    const holder = { runId: a.id, callId: 'd', tenant: 'acme', since: expect.stringMatching(ISO) };
    expect((await call(g.id, 'd', OPS)).waitingFor).toEqual([{ kind: 'tool', key: 'deploy', limit: 1, inUse: 1, holders: [holder] }]);
    // The agent of the same tenant sees the holder; the agent of another tenant a count, and no run id of acme.
    expect((await call(a2.id, 'd2', ACME)).waitingFor).toEqual([{ kind: 'tool', key: 'deploy', limit: 1, inUse: 1, holders: [holder] }]);
    const theirs = await api.get(`/v1/runs/${g.id}`, { token: GLOBEX });
    expect(theirs.body.calls[0].waitingFor).toEqual([{ kind: 'tool', key: 'deploy', limit: 1, inUse: 1, holders: [], otherHolders: 1 }]);
    expect(theirs.text).not.toContain(a.id);
    const stream = await sse(`${api.url}/v1/runs/${g.id}/events`, { authorization: `Bearer ${GLOBEX}` });
    const ev = await stream.next((e) => e.event === 'call.waiting');
    stream.close();
    expect(ev.data.data.waitingFor).toEqual([{ kind: 'tool', key: 'deploy', limit: 1, inUse: 1, holders: [], otherHolders: 1 }]);
    expect(JSON.stringify(stream.events)).not.toContain(a.id);
    // The operator sees the holder in the events too.
    const ops = await sse(`${api.url}/v1/runs/${g.id}/events`, { authorization: `Bearer ${OPS}` });
    expect((await ops.next((e) => e.event === 'call.waiting')).data.data.waitingFor[0].holders).toEqual([
      { runId: a.id, callId: 'd', tenant: 'acme', since: expect.any(Number) },
    ]);
    ops.close();
    const limits = (await api.get('/v1/limits', { token: OPS })).body.items;
    expect(limits).toContainEqual({
      kind: 'tool',
      key: 'deploy',
      limit: 1,
      inUse: 1,
      waiting: 2,
      longestWaitMs: expect.any(Number),
      holders: [holder],
    });

    // One at a time, never more: the next deploy starts only when the first ends.
    held.respond({ status: 200, body: {} });
    const second = await ts.next((r) => r.path === '/deploy' && r.body.runId !== a.id);
    expect(ts.held().filter((r) => r.path === '/deploy')).toHaveLength(1);
    second.respond({ status: 200, body: {} });
    const third = await ts.next((r) => r.path === '/deploy' && r.body.runId !== a.id && r !== second);
    third.respond({ status: 200, body: {} });
    for (const id of [a.id, g.id, a2.id]) expect((await api.settled(id, OPS)).status).toBe('succeeded');
    expect([second.body.runId, third.body.runId]).toEqual([g.id, a2.id]);
  });

  it('a rate wait gives retryAt: when the bucket has a token again', async () => {
    const r = await submit(ACME, [
      { id: 'n1', tool: 'notify', args: {} },
      { id: 'n2', tool: 'notify', args: {} },
    ]);
    const n2 = await call(r.id, 'n2', ACME);
    expect(n2).toMatchObject({ status: 'ready', waitingFor: [{ kind: 'rate', key: 'tool:notify', limit: 1, perMs: 60_000, holders: [] }] });
    const n1 = await api.service.wait({ role: 'operator' }, r.id, 5000, (v) => v.calls[0]?.status === 'succeeded');
    expect(Date.parse(n2.waitingFor[0].retryAt)).toBe(Date.parse(n1.calls[0]?.startedAt as string) + 60_000);
    expect((await api.get('/v1/limits', { token: OPS })).body.items).toContainEqual({
      kind: 'rate',
      key: 'tool:notify',
      limit: 1,
      perMs: 60_000,
      inUse: 1,
      waiting: 1,
      longestWaitMs: expect.any(Number),
      retryAt: n2.waitingFor[0].retryAt,
      holders: [],
    });
    expect((await api.post(`/v1/runs/${r.id}/cancel`, undefined, { token: ACME })).status).toBe(202);
  });

  it('a restarted server takes the wait back from the log, and explains it again', async () => {
    ts.on('/tests', () => 'hold');
    const a = await submit(ACME, [{ id: 'tests', tool: 'run_tests_idem', args: {} }]);
    await ts.call('tests', a.id);
    const b = await submit(ACME, [{ id: 'write', tool: 'write_file', args: { path: '/repo/r.ts' } }]);
    expect((await call(b.id, 'write')).waitingFor[0]).toMatchObject({ kind: 'lock', holders: [{ runId: a.id, callId: 'tests' }] });
    const before = (await call(b.id, 'write')).waitingFor[0].holders[0].since;
    api = await api.restart();
    // The idempotent holder runs again (a second request), and the writer waits for that attempt.
    const again = await ts.next((r) => r.body.runId === a.id && r.body.attempt === 2);
    const after = await call(b.id, 'write');
    expect(after.status).toBe('ready');
    expect(after.waitingFor).toEqual([
      {
        kind: 'lock',
        key: 'file:*',
        domain: 'tenant:acme',
        holders: [{ runId: a.id, callId: 'tests', tenant: 'acme', since: expect.stringMatching(ISO) }],
      },
    ]);
    expect(after.waitingFor[0].holders[0].since > before).toBe(true);
    const types = (await api.service.events({ role: 'operator' }, b.id, 0)).map((e) => e.type);
    expect(types.filter((t) => t === 'call.waiting')).toHaveLength(2);
    again.respond({ status: 200, body: {} });
    expect((await api.settled(b.id, OPS)).status).toBe('succeeded');
  });
});
