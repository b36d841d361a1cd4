// Flow control replays exactly (DESIGN §4, §8; #32 item 7, #30): recordings of runs under keyed limits,
// priorities, a queue timeout, a held run released later, a 429 that paused a tool on one process,
// and on PostgreSQL a pause told by another replica, fetched over HTTP as a user would, replay with 0
// divergences at the default tolerance and every start at its recorded time. A pause from outside
// the run is in its recording (`pauses`): dropped, the run it held back diverges.
//
// Real parts: http tools served by this process (a 429 with `Retry-After: 1` when asked), a real server
// on a SQLite file, two in-process replicas on one throwaway PostgreSQL.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Recording } from '../../src/contract/recording.js';
import { checkRecording } from '../../src/replay/check.js';
import { replayRecording } from '../../src/replay/replay.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { type Api, startApi } from '../helpers/server.js';

let server: Server;
let url = '';
let pgc: TestPostgres;
const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-replay-flow-'));

beforeAll(async () => {
  // Each tool answers after `args.ms` (else 5) ms; `args.busy` makes it a 429 with Retry-After: 1.
  server = createServer((req, res) => {
    let text = '';
    req.on('data', (c) => {
      text += String(c);
    });
    req.on('end', () => {
      const args = ((JSON.parse(text || '{}') as { args?: Record<string, unknown> }).args ?? {}) as Record<string, unknown>;
      setTimeout(
        () => {
          if (res.destroyed) return;
          if (args.busy) res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' }).end('{"error":"slow down"}');
          else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: args.id ?? true }));
        },
        typeof args.ms === 'number' ? args.ms : 5,
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  pgc = await startPostgres();
}, 60_000);

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  await pgc?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function yaml(): string {
  return `
tools:
  - name: push
    reads: []
    writes: []
    idempotent: true
    concurrency: { limit: 1, per: "{repo}" }
    queueTimeoutMs: 250
    executor: { kind: http, url: "${url}/push" }
  - name: edit
    reads: []
    writes: ["repo:{repo}/{file}"]
    scope: run
    idempotent: true
    executor: { kind: http, url: "${url}/edit" }
  - name: api
    reads: []
    writes: []
    executor: { kind: http, url: "${url}/api" }
  - name: work
    reads: []
    writes: []
    idempotent: true
    executor: { kind: http, url: "${url}/work" }
limits:
  each: { "repo:*": 1 }
defaults:
  failure: partial
`;
}

async function submit(api: Api, body: Record<string, unknown>): Promise<string> {
  const r = await api.post('/v1/runs', body);
  expect(r.status, r.text).toBe(201);
  return r.body.id as string;
}

async function recordingOf(api: Api, id: string): Promise<Recording> {
  await api.settled(id);
  const r = await api.get(`/v1/runs/${id}/recording`);
  expect(r.status).toBe(200);
  return r.body as Recording;
}

/** 0 divergences at the default tolerance, and every start replayed at its recorded time. */
function divergences(recs: readonly Recording[]): string[] {
  return recs.flatMap((rec) => {
    const res = checkRecording(rec, rec.run.id);
    const out = res.ok ? [] : [`${rec.run.id}: ${JSON.stringify(res.divergences).slice(0, 400)}`];
    const replayed = new Map(replayRecording(rec).replayed.attempts.map((a) => [`${a.compensation === true}/${a.callId}/${a.attempt}`, a]));
    for (const a of rec.attempts) {
      const b = replayed.get(`${a.compensation === true}/${a.callId}/${a.attempt}`);
      if (!b || Math.abs(b.startMs - a.startMs) > 1e-6)
        out.push(`${rec.run.id}: ${a.callId} attempt ${a.attempt} started at ${b?.startMs}, recorded at ${a.startMs}`);
    }
    return out;
  });
}

/** A run whose `b1` (api) is ready at once, beside a chain p1 → o1 of another tool: their order shows a pause. */
const paused = (t: string) => ({
  calls: [
    { id: 'b1', tool: 'api', args: { t } },
    { id: 'p1', tool: 'work', args: { ms: 100, t } },
    { id: 'o1', tool: 'work', args: { after: '${p1.output}', t } },
  ],
});

describe('flow control replays with 0 divergences', () => {
  it('on SQLite: keyed limits, priorities, a queue timeout and a held run, over concurrent runs', async () => {
    const api = await startApi({ yaml: yaml(), db: path.join(dir, 'keys.db') });
    try {
      const batch = (p: string, ms: number) => ({
        calls: [
          { id: `${p}1`, tool: 'push', args: { repo: 'web', ms } },
          { id: `${p}2`, tool: 'push', args: { repo: 'api', ms } },
          { id: `${p}3`, tool: 'edit', args: { repo: 'web', file: `${p}-a`, ms: 40 } },
          { id: `${p}4`, tool: 'edit', args: { repo: 'web', file: `${p}-b`, ms: 40 } },
          { id: `${p}5`, tool: 'work', args: { after: `\${${p}3.output}` } },
        ],
      });
      const ids = await Promise.all([
        submit(api, { ...batch('b', 150), priority: 5, concurrencyKey: 'chat' }),
        submit(api, { ...batch('u', 150), priority: 1 }),
        submit(api, { ...batch('m', 150) }),
      ]);
      // One run per key, queued: held until the first run of `chat` ends, then released.
      const held = await submit(api, { ...batch('n', 20), concurrencyKey: 'chat', onConcurrent: 'queue' });
      const recs = [];
      for (const id of [...ids, held]) recs.push(await recordingOf(api, id));
      // The workload had all of it: priorities, waits for other runs, a queue timeout, a release.
      const codes = recs.flatMap((r) => r.result.calls.map((c) => c.error?.code)).filter(Boolean);
      expect(codes.length).toBeGreaterThan(0);
      expect(new Set(codes)).toEqual(new Set(['queue_timeout']));
      expect(recs[3]?.releasedAtMs).toBeGreaterThan(0);
      expect(
        recs.flatMap((r) => r.attempts).filter((a) => a.waits?.some((w) => w.kind === 'turn' && w.toMs > w.fromMs)).length,
      ).toBeGreaterThan(3);
      expect(divergences(recs)).toEqual([]);
    } finally {
      await api.close();
    }
  }, 60_000);

  it("on SQLite: another run's 429 paused the tool; the run it held back replays, and diverges without the pause", async () => {
    const api = await startApi({ yaml: yaml(), db: path.join(dir, 'pause.db') });
    try {
      const first = await submit(api, { calls: [{ id: 'a1', tool: 'api', args: { busy: true } }] });
      const a = await recordingOf(api, first);
      expect(a.attempts[0]).toMatchObject({ pauseMs: 1000, pauseStatus: 429 });
      const rec = await recordingOf(api, await submit(api, paused('sqlite')));
      expect(rec.pauses).toEqual([{ atMs: 0, tool: 'api', untilMs: expect.any(Number), status: 429 }]);
      const start = (id: string) => rec.attempts.find((x) => x.callId === id)?.startMs ?? -1;
      // b1 waited for the pause: after o1, which waited only for p1.
      expect(start('b1')).toBeGreaterThanOrEqual((rec.pauses?.[0]?.untilMs ?? 0) - 1);
      expect(start('b1')).toBeGreaterThan(start('o1') + 5);
      expect(divergences([a, rec])).toEqual([]);
      // The pause alone keeps b1 after o1 (a start's `waits` may hold it too, when the timer that
      // ended the pause fired late): without the waits it still matches, without the pause too not.
      const unwaited = { ...rec, attempts: rec.attempts.map(({ waits: _w, ...x }) => x) };
      expect(checkRecording(unwaited, 'unwaited').divergences).toEqual([]);
      const { pauses: _, ...dropped } = unwaited;
      expect(checkRecording(dropped, 'dropped').divergences).toMatchObject([{ kind: 'order', after: { callId: 'b1' } }]);
    } finally {
      await api.close();
    }
  }, 60_000);

  it('on PostgreSQL: a 429 on one replica pauses the tool on the other while its run waits; that run replays', async () => {
    const db = await pgc.createDatabase();
    const r0 = await startApi({ yaml: yaml(), db, replica: 'r0' });
    const r1 = await startApi({ yaml: yaml(), db, replica: 'r1' });
    try {
      // The run on r1 first: its b1 waits for p1 (300 ms) while r0's call gets the 429.
      const waiting = await submit(r1, {
        calls: [
          { id: 'p1', tool: 'work', args: { ms: 300 } },
          { id: 'b1', tool: 'api', args: { after: '${p1.output}' } },
          { id: 'q1', tool: 'work', args: { after: '${p1.output}', ms: 200 } },
          { id: 'o1', tool: 'work', args: { after: '${q1.output}' } },
        ],
      });
      const first = await submit(r0, { calls: [{ id: 'a1', tool: 'api', args: { busy: true } }] });
      const a = await recordingOf(r0, first);
      expect(a.attempts[0]).toMatchObject({ pauseMs: 1000, pauseStatus: 429 });
      // A run submitted on r1 while the pause lasts records it as it arrives.
      const later = await submit(r1, paused('pg'));
      const rec = await recordingOf(r1, waiting);
      // r1 learned it by NOTIFY while the run was under way, and recorded it then.
      expect(rec.pauses?.length).toBe(1);
      const p = rec.pauses?.[0] as NonNullable<Recording['pauses']>[number];
      expect(p).toMatchObject({ tool: 'api', status: 429 });
      expect(p.atMs).toBeGreaterThan(0);
      const b1 = rec.attempts.find((x) => x.callId === 'b1');
      expect(b1?.startMs).toBeGreaterThanOrEqual(p.untilMs - 1);
      const rec2 = await recordingOf(r1, later);
      // (as it arrived, or a moment later if the NOTIFY was still on its way)
      expect(rec2.pauses).toMatchObject([{ tool: 'api', status: 429 }]);
      expect(divergences([a, rec, rec2])).toEqual([]);
    } finally {
      await r1.close();
      await r0.close();
    }
  }, 90_000);
});
