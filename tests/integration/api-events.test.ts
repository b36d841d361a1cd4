/**
 * `GET /v1/runs/{id}/events` (DESIGN §7): Server-Sent Events whose `id:` is the seq, gapless from 1,
 * ending with the run; resuming after event N with `Last-Event-ID` or `?from=N`; a live stream shows
 * events as they happen; many subscribers each get every event. Real server, real SQLite, a held tool
 * request for deterministic timing.
 */
import net from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { catalogYaml, closeAll, sse, startApi, startToolApi, type Api, type SseEvent } from '../helpers/server.js';
import type { ToolServer } from '../helpers/toolserver.js';

let ts: ToolServer;
let api: Api;

beforeEach(async () => {
  ({ ts, api } = await startToolApi());
});

afterEach(closeAll);

const BATCH = {
  calls: [
    { id: 'c1', tool: 'work', args: { out: { v: 1 } } },
    { id: 'c2', tool: 'echo', args: { v: '${c1.output.v}' } },
    { id: 'c3', tool: 'nope' },
  ],
};

function expectGapless(events: SseEvent[], from = 1): void {
  expect(events.map((e) => e.id)).toEqual(events.map((_, i) => from + i));
  for (const e of events) {
    expect(e.data.seq).toBe(e.id);
    expect(e.event).toBe(e.data.type);
  }
}

/** Writes `requests` (raw HTTP/1.1) at once on one socket; resolves with all that came back once the server closes it. */
function rawUntilClosed(base: string, requests: string[]): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(requests.join('')));
    let out = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (out += d));
    socket.on('error', reject);
    socket.on('end', () => resolve(out));
  });
}

async function endedRun(): Promise<{ id: string; events: SseEvent[] }> {
  const res = await api.post('/v1/runs', { ...BATCH, waitMs: 10_000 });
  expect(res.body.status).toBe('partial');
  const s = await sse(`${api.url}/v1/runs/${res.body.id}/events`);
  return { id: res.body.id, events: await s.ended };
}

describe('events of an ended run', () => {
  it('replays every event with id = seq, gapless from 1, and the stream closes after run.completed', async () => {
    const res = await api.post('/v1/runs', { ...BATCH, waitMs: 10_000 });
    const s = await sse(`${api.url}/v1/runs/${res.body.id}/events`);
    expect(s.status).toBe(200);
    expect(s.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = await s.ended;
    expectGapless(events);
    expect(events[0]!.event).toBe('run.created');
    expect(events[events.length - 1]!.event).toBe('run.completed');
    expect(events[events.length - 1]!.data.data.status).toBe('partial');
    for (const e of events) {
      expect(e.data.runId).toBe(res.body.id);
      expect(typeof e.data.at).toBe('string');
      expect(Number.isNaN(Date.parse(e.data.at))).toBe(false);
    }
    const types = events.map((e) => e.event);
    expect(types).toEqual(expect.arrayContaining(['run.started', 'call.started', 'call.succeeded', 'call.failed']));
    // The same events as the store holds, in the same order.
    expect(events.map((e) => e.data.type)).toEqual((await api.store.events(res.body.id)).map((e) => e.type));
  });

  it('Last-Event-ID: N gives exactly the events after N', async () => {
    const { id, events } = await endedRun();
    const n = 3;
    const s = await sse(`${api.url}/v1/runs/${id}/events`, { 'last-event-id': String(n) });
    const rest = await s.ended;
    expectGapless(rest, n + 1);
    expect(rest.map((e) => e.data)).toEqual(events.slice(n).map((e) => e.data));
  });

  it('?from=N gives exactly the events after N', async () => {
    const { id, events } = await endedRun();
    for (const n of [0, 1, events.length - 1, events.length]) {
      const rest = await (await sse(`${api.url}/v1/runs/${id}/events?from=${n}`)).ended;
      expect(rest.map((e) => e.id)).toEqual(events.slice(n).map((e) => e.id));
    }
  });

  it('from beyond the last event gives nothing and closes', async () => {
    const { id, events } = await endedRun();
    const rest = await (await sse(`${api.url}/v1/runs/${id}/events?from=${events.length + 10}`)).ended;
    expect(rest).toEqual([]);
  });

  it.each([
    ['?from=-1', {}],
    ['?from=abc', {}],
    ['?from=1.5', {}],
    ['?colour=red', {}],
    ['', { 'last-event-id': 'abc' }],
    ['', { 'last-event-id': '-2' }],
  ])('a bad resume point (%s %j) is a 400 with an error body', async (q, headers) => {
    const { id } = await endedRun();
    const res = await api.get(`/v1/runs/${id}/events${q}`, { headers: headers as Record<string, string> });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', message: expect.any(String) });
  });

  it("a stream that ends leaves its connection as the client asked: reusable (with the server's keep-alive timeout), or closed", async () => {
    const { id } = await endedRun();
    const get = (p: string, connection: string) => `GET ${p} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: ${connection}\r\n\r\n`;
    // Kept alive: the next request on the same socket is answered after the stream's last chunk.
    const kept = await rawUntilClosed(api.url, [get(`/v1/runs/${id}/events`, 'keep-alive'), get(`/v1/runs/${id}`, 'close')]);
    const [first, second] = kept.split(/(?=^HTTP\/1\.1 )/m);
    expect(first).toMatch(/^HTTP\/1\.1 200 /);
    expect(first).toMatch(/^content-type: text\/event-stream/im);
    expect(first).toMatch(/^connection: keep-alive\r$/im);
    expect(first).toMatch(/^keep-alive: timeout=\d+\r$/im);
    expect(first).toMatch(/event: run\.completed\n[\s\S]*\r\n0\r\n\r\n$/);
    expect(second).toMatch(/^HTTP\/1\.1 200 /);
    expect(second).toContain(`"id":"${id}"`);
    // Asked to close: the stream says so and the server closes the socket after it.
    const closed = await rawUntilClosed(api.url, [get(`/v1/runs/${id}/events`, 'close')]);
    expect(closed.match(/^HTTP\/1\.1 /gm)).toHaveLength(1);
    expect(closed).toMatch(/^connection: close\r$/im);
    expect(closed).toMatch(/event: run\.completed\n/);
  });

  it('an unknown run is a 404 with an error body, not a stream', async () => {
    const res = await api.get('/v1/runs/run_nope/events');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
  });
});

describe('live events', () => {
  it('a subscriber sees call.started while the tool is still working, then the rest as it happens', async () => {
    const res = await api.post('/v1/runs', {
      calls: [
        { id: 'c1', tool: 'work', args: { hold: true } },
        { id: 'c2', tool: 'echo', args: { v: '${c1.output}' } },
      ],
    });
    const runId = res.body.id as string;
    const s = await sse(`${api.url}/v1/runs/${runId}/events`);
    const held = await ts.call('c1', runId);
    const started = await s.next((e) => e.event === 'call.started' && e.data.callId === 'c1');
    expect(started.data.data.attempt).toBe(1);
    // The tool has not answered: nothing after c1's start has happened yet.
    expect(held.answered).toBe(false);
    expect(s.events.some((e) => e.event === 'call.succeeded' || e.event === 'run.completed')).toBe(false);

    held.respond({ status: 200, body: { ok: true } });
    const events = await s.ended;
    expectGapless(events);
    const types = events.map((e) => `${e.event}${e.data.callId ? `:${e.data.callId}` : ''}`);
    expect(types.indexOf('call.succeeded:c1')).toBeGreaterThan(types.indexOf('call.started:c1'));
    expect(types.indexOf('call.started:c2')).toBeGreaterThan(types.indexOf('call.succeeded:c1'));
    expect(types[types.length - 1]).toBe('run.completed');
    expect(events.map((e) => e.data.type)).toEqual((await api.store.events(runId)).map((e) => e.type));
  });

  it('resuming a live run with Last-Event-ID gets the stored events after N, then the live tail, with no gap or repeat', async () => {
    const res = await api.post('/v1/runs', {
      calls: [
        { id: 'c1', tool: 'work', args: { hold: true } },
        { id: 'c2', tool: 'echo' },
      ],
    });
    const runId = res.body.id as string;
    const first = await sse(`${api.url}/v1/runs/${runId}/events`);
    await ts.call('c1', runId);
    const lastSeen = (await first.next((e) => e.event === 'call.started' && e.data.callId === 'c1')).id as number;
    first.close();
    await first.ended;

    const second = await sse(`${api.url}/v1/runs/${runId}/events`, { 'last-event-id': String(lastSeen) });
    ts.release();
    const rest = await second.ended;
    expectGapless(rest, lastSeen + 1);
    const all = await api.store.events(runId);
    expect(rest.map((e) => e.id)).toEqual((await all).filter((e) => e.seq > lastSeen).map((e) => e.seq));
    expect(rest[rest.length - 1]!.event).toBe('run.completed');
  });

  it('20 concurrent subscribers each receive every event, in order', async () => {
    const res = await api.post('/v1/runs', {
      calls: [
        { id: 'c1', tool: 'work', args: { hold: true } },
        { id: 'c2', tool: 'work', args: { hold: true } },
        { id: 'c3', tool: 'echo', args: { a: '${c1.output}', b: '${c2.output}' } },
      ],
    });
    const runId = res.body.id as string;
    const subs = await Promise.all(Array.from({ length: 20 }, () => sse(`${api.url}/v1/runs/${runId}/events`)));
    const c1 = await ts.call('c1', runId);
    const c2 = await ts.call('c2', runId);
    // Everyone is attached and has seen the starts before the tools answer.
    await Promise.all(subs.map((s) => s.next((e) => e.event === 'call.started' && e.data.callId === 'c2')));
    c2.respond();
    await Promise.all(subs.map((s) => s.next((e) => e.event === 'call.succeeded' && e.data.callId === 'c2')));
    c1.respond();
    const all = await Promise.all(subs.map((s) => s.ended));
    const stored = (await api.store.events(runId)).map((e) => ({ seq: e.seq, type: e.type }));
    expect(stored[stored.length - 1]!.type).toBe('run.completed');
    for (const events of all) {
      expectGapless(events);
      expect(events.map((e) => ({ seq: e.id, type: e.event }))).toEqual(stored);
    }
  });

  it('a subscriber that disconnects early does not disturb the run or other subscribers', async () => {
    const res = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'work', args: { hold: true } }] });
    const runId = res.body.id as string;
    const leaver = await sse(`${api.url}/v1/runs/${runId}/events`);
    const stayer = await sse(`${api.url}/v1/runs/${runId}/events`);
    await leaver.next((e) => e.event === 'call.started');
    leaver.close();
    await leaver.ended;
    (await ts.call('c1', runId)).respond();
    const events = await stayer.ended;
    expectGapless(events);
    expect(events[events.length - 1]!.event).toBe('run.completed');
    expect((await api.get(`/v1/runs/${runId}`)).body.status).toBe('succeeded');
  });

  it('heartbeat comments keep an idle stream alive', async () => {
    await api.close();
    api = await startApi({ yaml: catalogYaml(ts), heartbeatMs: 20 });
    const res = await api.post('/v1/runs', { calls: [{ id: 'c1', tool: 'work', args: { hold: true } }] });
    const s = await sse(`${api.url}/v1/runs/${res.body.id}/events`);
    const held = await ts.call('c1', res.body.id);
    await s.next((e) => e.event === 'call.started');
    await s.waitComments('ping', 2);
    held.respond();
    const events = await s.ended;
    expect(events[events.length - 1]!.event).toBe('run.completed');
  });
});
