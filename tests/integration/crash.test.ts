/**
 * Crash recovery (DESIGN §8) with real parts: `toolgraph serve` runs as a child process on a real
 * SQLite file, its tools are HTTP tools served by this test (so the test sees every attempt and can
 * hold calls in flight), and the child is killed with SIGKILL while calls run, then started again on
 * the same database.
 *
 * After the restart: calls that had finished keep their outputs and are not sent again; running
 * idempotent calls run again (a new attempt with the same Idempotency-Key); running non-idempotent calls
 * fail with `interrupted` and the run's mode applies; a call awaiting review still awaits it and can be
 * approved; every accepted run ends; each run's event seqs stay gapless across the restart.
 *
 * On PostgreSQL the server keeps its `--replica-id` across the restart, as a restarted replica does:
 * the new process ends its earlier instance's lease at once and takes its runs over (DESIGN §12).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, until, type ServerChild } from '../helpers/child.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

// ---- the tool server: records every attempt, holds the "hold" tools while told to -----------------

interface Attempt {
  phase: number;
  tool: string;
  runId: string;
  callId: string;
  attempt: number;
  key: string | undefined;
  args: Record<string, unknown>;
}

class ToolServer {
  readonly attempts: Attempt[] = [];
  phase = 1;
  /** While true, tools named hold_* and slot answer only when released (or never). */
  holding = true;
  private readonly held: { a: Attempt; res: ServerResponse; answer: () => void }[] = [];
  private server!: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let text = '';
    for await (const chunk of req) text += String(chunk);
    const body = JSON.parse(text) as { runId: string; callId: string; tool: string; attempt: number; args: Record<string, unknown> };
    const key = req.headers['idempotency-key'];
    const a: Attempt = {
      phase: this.phase,
      tool: body.tool,
      runId: body.runId,
      callId: body.callId,
      attempt: body.attempt,
      key: typeof key === 'string' ? key : undefined,
      args: body.args,
    };
    this.attempts.push(a);
    const answer = () => {
      if (res.writableEnded || res.destroyed) return;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ tool: a.tool, callId: a.callId, attempt: a.attempt, phase: a.phase }));
    };
    res.on('error', () => {});
    if (this.holding && (body.tool.startsWith('hold_') || body.tool === 'slot')) this.held.push({ a, res, answer });
    else answer();
  }

  /** Answers a held call now. */
  release(runId: string, callId: string): void {
    for (const h of this.held) if (h.a.runId === runId && h.a.callId === callId) h.answer();
  }

  of(runId: string, callId: string, phase?: number): Attempt[] {
    return this.attempts.filter((a) => a.runId === runId && a.callId === callId && (phase === undefined || a.phase === phase));
  }

  async close(): Promise<void> {
    for (const h of this.held) h.res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

// ---- a small API client --------------------------------------------------------------------------

interface CallView {
  id: string;
  status: string;
  attempts: number;
  output: unknown;
  error: { code: string; callId?: string } | null;
  blockedBy: { code: string; callId?: string } | null;
  compensation?: { status: string };
}
interface RunView {
  id: string;
  status: string;
  calls: CallView[];
  diagnostics: { code: string }[];
  replanContext?: { failed: { callId: string; error: { code: string } }[]; waiting: string[] };
}

async function api<T = unknown>(
  base: string,
  method: string,
  p: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: T }> {
  const res = await fetch(base + p, {
    method,
    headers: body !== undefined ? { 'content-type': 'application/json', ...headers } : headers,
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}

const call = (run: RunView, id: string): CallView => {
  const c = run.calls.find((x) => x.id === id);
  if (!c) throw new Error(`run ${run.id} has no call ${id}`);
  return c;
};

interface SseEvent {
  seq: number;
  type: string;
  callId?: string;
  data: Record<string, unknown>;
}

/** Reads a run's event stream until it closes (or the connection dies); the events it got. */
async function readEvents(base: string, runId: string, lastEventId?: number, into: SseEvent[] = []): Promise<SseEvent[]> {
  try {
    const res = await fetch(`${base}/v1/runs/${runId}/events`, {
      headers: lastEventId !== undefined ? { 'last-event-id': String(lastEventId) } : {},
    });
    if (res.status !== 200 || !res.body) throw new Error(`events of ${runId}: HTTP ${res.status}`);
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let i: number;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = block.split('\n').find((l) => l.startsWith('data: '));
        if (data) into.push(JSON.parse(data.slice(6)) as SseEvent);
      }
    }
  } catch (e) {
    // The server was killed under the stream: what arrived is kept.
    if (!(e instanceof TypeError) && !(e as Error).message?.includes('terminated')) throw e;
  }
  return into;
}

function expectGapless(events: SseEvent[], runId: string): void {
  const seqs = events.map((e) => e.seq);
  expect(seqs, `seqs of ${runId}`).toEqual(seqs.map((_, i) => i + 1));
  expect(events[0]?.type).toBe('run.created');
  expect(events.at(-1)?.type, `last event of ${runId}`).toBe('run.completed');
}

// ---- the test ------------------------------------------------------------------------------------

function configYaml(toolUrl: string): string {
  const http = (name: string) => `{ kind: http, url: "${toolUrl}/${name}" }`;
  return `
tools:
  - name: quick
    description: idempotent, answers at once
    reads: []
    writes: []
    risk: read
    idempotent: true
    executor: ${http('quick')}
  - name: quick_write
    description: not idempotent, answers at once; compensated by undo
    reads: []
    writes: ["thing:{name}"]
    scope: run
    idempotent: false
    compensate: { tool: undo, args: { name: "\${self.args.name}" } }
    executor: ${http('quick_write')}
  - name: undo
    reads: []
    writes: []
    idempotent: true
    executor: ${http('undo')}
  - name: hold_idem
    description: idempotent, held in flight by the test
    reads: []
    writes: []
    idempotent: true
    executor: ${http('hold_idem')}
  - name: hold_once
    description: not idempotent, held in flight by the test
    reads: []
    writes: []
    idempotent: false
    executor: ${http('hold_once')}
  - name: slot
    description: idempotent, held, one at a time
    reads: []
    writes: []
    idempotent: true
    concurrency: 1
    executor: ${http('slot')}
  - name: gated
    description: dangerous, so it waits for a human review
    reads: []
    writes: []
    risk: dangerous
    idempotent: true
    executor: ${http('gated')}
  - name: echo
    reads: []
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: echo }
defaults:
  failure: partial
`;
}

describe.each(['sqlite', 'postgres'])(
  'crash recovery (%s): kill -9 the server while calls run, start it again on the same database',
  (kind) => {
    const tools = new ToolServer();
    let cluster: TestPostgres | undefined;
    /** A fresh database of this kind: a SQLite file in `dir`, or a database of the test cluster. */
    const database = async (name: string) => (cluster ? cluster.createDatabase() : path.join(dir, name));
    let dir = '';
    let config = '';
    let db = '';
    let first: ServerChild | undefined;
    let second: ServerChild | undefined;
    let third: ServerChild | undefined;

    beforeAll(async () => {
      await tools.start();
      dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-crash-'));
      config = path.join(dir, 'toolgraph.yaml');
      if (kind === 'postgres') cluster = await startPostgres();
      db = await database('toolgraph.db');
      writeFileSync(config, configYaml(tools.url));
    }, 60_000);

    afterAll(async () => {
      await first?.kill9();
      await third?.kill9();
      await second?.stop();
      await tools.close();
      await cluster?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('keeps finished calls, re-runs idempotent ones, interrupts the others, and ends every run', { timeout: 120_000 }, async () => {
      first = await startServer({ config, db, args: ['--replica-id', 'crash'] });
      const base1 = first.url;
      const submit = async (body: unknown, key?: string) => {
        const r = await api<RunView>(base1, 'POST', '/v1/runs', body, key ? { 'idempotency-key': key } : {});
        expect(r.status, JSON.stringify(r.body)).toBe(201);
        return r.body.id;
      };

      // A, partial: finished calls, a running idempotent call with a dependent, a running
      // non-idempotent call with a dependent.
      const A = await submit(
        {
          failure: 'partial',
          calls: [
            { id: 'a1', tool: 'quick', args: { n: 1 } },
            { id: 'a2', tool: 'quick_write', args: { name: 'a' } },
            { id: 'a3', tool: 'hold_idem', args: {} },
            { id: 'a4', tool: 'echo', args: { from: '${a3.output}' } },
            { id: 'a5', tool: 'hold_once', args: {} },
            { id: 'a6', tool: 'echo', args: { from: '${a5.output}' } },
            { id: 'a7', tool: 'echo', args: { from: '${a1.output}' } },
          ],
        },
        'crash-A',
      );
      // B, fail_fast: the interrupted non-idempotent call fails the run fast; the idempotent call that
      // was running beside it is cancelled, and the finished write is compensated.
      const B = await submit({
        failure: 'fail_fast',
        calls: [
          { id: 'b1', tool: 'quick_write', args: { name: 'b' } },
          { id: 'b2', tool: 'hold_once', args: {} },
          { id: 'b3', tool: 'hold_idem', args: {} },
        ],
      });
      // F, fail_fast with two non-idempotent calls running: both outcomes are unknown, so both fail
      // with interrupted (the first one's fail-fast must not turn the other into cancelled).
      const F = await submit({
        failure: 'fail_fast',
        calls: [
          { id: 'f1', tool: 'hold_once', args: { n: 1 } },
          { id: 'f2', tool: 'hold_once', args: { n: 2 } },
          { id: 'f3', tool: 'echo', args: { from: '${f2.output}' } },
        ],
      });
      // S, a streamed run (DESIGN §10), open at the crash: a running idempotent call, a call that uses
      // it, and one that waits for a call that has not arrived yet.
      const S = await submit({ open: true, calls: [{ id: 's1', tool: 'hold_idem', args: {} }] });
      const appended = await api<RunView>(base1, 'POST', `/v1/runs/${S}/calls`, {
        calls: [
          { id: 's2', tool: 'echo', args: { from: '${s1.output}' } },
          { id: 's3', tool: 'echo', args: { from: '${later.output.callId}' } },
        ],
      });
      expect(appended.status, JSON.stringify(appended.body)).toBeLessThan(300);
      // C, replan: the interrupted call hands the run to a replan.
      const C = await submit({
        failure: 'replan',
        calls: [
          { id: 'r1', tool: 'hold_once', args: {} },
          { id: 'r2', tool: 'echo', args: { from: '${r1.output}' } },
          { id: 'r3', tool: 'quick', args: {} },
        ],
      });
      // D: a call awaiting review at the crash.
      const D = await submit({
        calls: [
          { id: 'd1', tool: 'quick', args: {} },
          { id: 'd2', tool: 'gated', args: { x: 1 } },
          { id: 'd3', tool: 'echo', args: { from: '${d2.output}' } },
        ],
      });
      // E: one slot call running, the next one ready and waiting for the tool's limit.
      const E = await submit({
        calls: [
          { id: 'e1', tool: 'slot', args: { n: 1 } },
          { id: 'e2', tool: 'slot', args: { n: 2 } },
        ],
      });
      // More runs of the same shapes, so recovery handles several at once.
      const more: string[] = [];
      for (let i = 0; i < 6; i++) {
        more.push(
          await submit({
            failure: i % 2 === 0 ? 'partial' : 'fail_fast',
            calls: [
              { id: 'm1', tool: 'quick', args: { i } },
              { id: 'm2', tool: 'hold_idem', args: { i } },
              { id: 'm3', tool: 'echo', args: { from: '${m2.output}' } },
            ],
          }),
        );
      }
      const all = [A, B, C, D, E, F, S, ...more];

      // Streams opened before the crash: they get cut by the kill and are resumed with Last-Event-ID.
      const before = new Map(all.map((id) => [id, readEvents(base1, id)]));

      // Wait until every run stands where the test wants it at the crash (and the held calls reached
      // the tool server: they are really in flight).
      const expected: Record<string, Record<string, string>> = {
        [A]: { a1: 'succeeded', a2: 'succeeded', a3: 'running', a5: 'running', a7: 'succeeded' },
        [B]: { b1: 'succeeded', b2: 'running', b3: 'running' },
        [C]: { r1: 'running', r3: 'succeeded' },
        [D]: { d1: 'succeeded', d2: 'awaiting_review' },
        [E]: { e1: 'running', e2: 'ready' },
        [F]: { f1: 'running', f2: 'running' },
        [S]: { s1: 'running', s2: 'pending', s3: 'pending' },
        ...Object.fromEntries(more.map((id) => [id, { m1: 'succeeded', m2: 'running' }])),
      };
      const held: [string, string][] = [
        [A, 'a3'],
        [A, 'a5'],
        [B, 'b2'],
        [B, 'b3'],
        [C, 'r1'],
        [E, 'e1'],
        [F, 'f1'],
        [F, 'f2'],
        [S, 's1'],
        ...more.map((id) => [id, 'm2'] as [string, string]),
      ];
      const atCrash = new Map<string, RunView>();
      await until(
        'every run to reach its pre-crash state',
        async () => {
          for (const id of all) {
            const r = await api<RunView>(base1, 'GET', `/v1/runs/${id}`);
            for (const [c, s] of Object.entries(expected[id] as Record<string, string>)) if (call(r.body, c).status !== s) return undefined;
            atCrash.set(id, r.body);
          }
          return held.every(([r, c]) => tools.of(r, c).length === 1) ? true : undefined;
        },
        30_000,
      );
      expect(tools.of(E, 'e2')).toEqual([]);
      expect(tools.of(D, 'd2')).toEqual([]);
      const reviewsBefore = await api<{ items: { id: string; callId: string }[] }>(base1, 'GET', `/v1/reviews?runId=${D}`);
      expect(reviewsBefore.body.items.map((r) => r.callId)).toEqual(['d2']);

      // ---- the crash ----
      await first.kill9();
      const cut = new Map<string, SseEvent[]>();
      for (const [id, p] of before) cut.set(id, await p);
      const phase1 = tools.attempts.length;
      tools.phase = 2;
      tools.holding = false;

      second = await startServer({ config, db, args: ['--replica-id', 'crash'] });
      const base2 = second.url;

      // The streamed run is still open after the restart: the missing call arrives, then the seal.
      const later = await api<RunView>(base2, 'POST', `/v1/runs/${S}/calls`, { calls: [{ id: 'later', tool: 'quick', args: { n: 7 } }] });
      expect(later.status, JSON.stringify(later.body)).toBeLessThan(300);
      const sealed = await api<RunView>(base2, 'POST', `/v1/runs/${S}/seal`, {});
      expect(sealed.status, JSON.stringify(sealed.body)).toBeLessThan(300);

      // Every run but D (which waits for a human) and C (handed to a replan) ends on its own.
      const ended = new Set(['succeeded', 'partial', 'failed', 'needs_replan', 'deadlocked', 'cancelled']);
      const after = new Map<string, RunView>();
      await until(
        'the recovered runs to end',
        async () => {
          for (const id of all.filter((x) => x !== D)) {
            const r = await api<RunView>(base2, 'GET', `/v1/runs/${id}`);
            if (!ended.has(r.body.status)) return undefined;
            after.set(id, r.body);
          }
          return true;
        },
        30_000,
      );

      // Nothing that had finished was sent again: the only phase-2 attempts are re-runs of running
      // idempotent calls, the slot call that waited, the compensation, and what ran after them.
      const phase2 = tools.attempts.slice(phase1);
      const sentAgain = (runId: string, callId: string) =>
        phase2.filter((a) => a.runId === runId && a.callId === callId && a.tool !== 'undo');
      for (const [id, view] of atCrash) {
        for (const c of view.calls) {
          if (c.status !== 'succeeded') continue;
          expect(sentAgain(id, c.id), `${id}/${c.id} finished before the crash`).toEqual([]);
          expect(call(after.get(id) ?? view, c.id).output, `${id}/${c.id} keeps its output`).toEqual(c.output);
        }
      }
      // Running non-idempotent calls are never sent again; neither is B's cancelled b3.
      for (const [r, c] of [
        [A, 'a5'],
        [B, 'b2'],
        [B, 'b3'],
        [C, 'r1'],
        [F, 'f1'],
        [F, 'f2'],
      ] as const)
        expect(tools.of(r, c, 2), `${r}/${c}`).toEqual([]);

      // A: the idempotent call ran again, with a new attempt and the same key; its dependent used the
      // new output. The interrupted call failed and, the run being partial, blocked its dependent.
      const a = after.get(A) as RunView;
      const [a3first] = tools.of(A, 'a3', 1);
      const a3again = tools.of(A, 'a3', 2);
      expect(a3again).toHaveLength(1);
      expect(a3again[0]).toMatchObject({ attempt: 2, key: `${A}/a3` });
      expect(a3first?.key).toBe(`${A}/a3`);
      expect(call(a, 'a3')).toMatchObject({ status: 'succeeded', attempts: 2, output: { callId: 'a3', attempt: 2, phase: 2 } });
      expect(call(a, 'a4')).toMatchObject({ status: 'succeeded', output: { from: { callId: 'a3', attempt: 2, phase: 2 } } });
      expect(call(a, 'a5')).toMatchObject({ status: 'failed', error: { code: 'outcome_unknown' } });
      expect(call(a, 'a6')).toMatchObject({ status: 'blocked', blockedBy: { code: 'dependency_failed', callId: 'a5' } });
      expect(call(a, 'a7')).toMatchObject({ status: 'succeeded', output: { from: { callId: 'a1', phase: 1 } } });
      expect(a.status).toBe('partial');

      // B: fail-fast applies to the interrupted call: the run fails, the idempotent call beside it is
      // cancelled (not re-run), and the succeeded write is compensated.
      const b = after.get(B) as RunView;
      expect(b.status).toBe('failed');
      expect(call(b, 'b1')).toMatchObject({ status: 'succeeded', compensation: { status: 'succeeded' } });
      expect(call(b, 'b2')).toMatchObject({ status: 'failed', error: { code: 'outcome_unknown' } });
      expect(call(b, 'b3')).toMatchObject({ status: 'cancelled', error: { code: 'cancelled', callId: 'b2' } });
      expect(b.diagnostics.filter((d) => d.code === 'deadlock')).toEqual([]);
      expect(phase2.filter((x) => x.runId === B && x.tool === 'undo').map((x) => x.args)).toEqual([{ name: 'b' }]);

      const f = after.get(F) as RunView;
      expect(f.status).toBe('failed');
      expect(call(f, 'f1')).toMatchObject({ status: 'failed', error: { code: 'outcome_unknown' } });
      expect(call(f, 'f2')).toMatchObject({ status: 'failed', error: { code: 'outcome_unknown' } });
      expect(call(f, 'f3')).toMatchObject({ status: 'cancelled', error: { code: 'cancelled', callId: 'f1' } });

      // C: replan mode: the run waits for a replan, which still works after the restart.
      const c = after.get(C) as RunView;
      expect(c.status).toBe('needs_replan');
      expect(c.replanContext).toMatchObject({ failed: [{ callId: 'r1', error: { code: 'outcome_unknown' } }], waiting: ['r2'] });
      const replanned = await api<RunView>(base2, 'POST', `/v1/runs/${C}/replan`, {
        calls: [{ id: 'r4', tool: 'quick', args: { again: true } }],
      });
      expect(replanned.status, JSON.stringify(replanned.body)).toBe(202);

      // E: the running slot call ran again, then the one that was waiting for the limit ran once.
      const e = after.get(E) as RunView;
      expect(e.status).toBe('succeeded');
      expect(tools.of(E, 'e1', 2)).toMatchObject([{ attempt: 2, key: `${E}/e1` }]);
      expect(tools.of(E, 'e2')).toMatchObject([{ phase: 2, attempt: 1 }]);

      // S: the streamed run's running call ran again; the rest ran after it and after the late call.
      const st = after.get(S) as RunView;
      expect(st.status, JSON.stringify(st, null, 1)).toBe('succeeded');
      expect(tools.of(S, 's1', 2)).toMatchObject([{ attempt: 2, key: `${S}/s1` }]);
      expect(call(st, 's2')).toMatchObject({ status: 'succeeded', output: { from: { callId: 's1', attempt: 2, phase: 2 } } });
      expect(call(st, 's3')).toMatchObject({ status: 'succeeded', output: { from: 'later' } });

      for (const id of more) {
        const m = after.get(id) as RunView;
        expect(m.status, id).toBe('succeeded');
        expect(tools.of(id, 'm2', 2)).toMatchObject([{ attempt: 2, key: `${id}/m2` }]);
      }

      // D: still awaiting review after the restart, and the review can be approved.
      const d = await api<RunView>(base2, 'GET', `/v1/runs/${D}`);
      expect(d.body.status).toBe('running');
      expect(call(d.body, 'd2').status).toBe('awaiting_review');
      const reviews = await api<{ items: { id: string; callId: string }[] }>(base2, 'GET', `/v1/reviews?runId=${D}`);
      expect(reviews.body.items).toEqual([expect.objectContaining({ id: reviewsBefore.body.items[0]?.id, callId: 'd2' })]);
      expect(tools.of(D, 'd2')).toEqual([]);
      const approved = await api<RunView>(base2, 'POST', `/v1/reviews/${reviews.body.items[0]?.id}`, { decision: 'approve' });
      expect(approved.status, JSON.stringify(approved.body)).toBe(200);

      for (const id of [C, D]) {
        after.set(
          id,
          await until(`${id} to end`, async () => {
            const r = await api<RunView>(base2, 'GET', `/v1/runs/${id}`);
            return ended.has(r.body.status) && r.body.status !== 'needs_replan' ? r.body : undefined;
          }),
        );
      }
      expect(after.get(C)?.status).toBe('succeeded');
      expect(call(after.get(D) as RunView, 'd3')).toMatchObject({
        status: 'succeeded',
        output: { from: { callId: 'd2', phase: 2, attempt: 1 } },
      });
      expect(after.get(D)?.status).toBe('succeeded');

      // Every accepted run ended and is listed; the idempotency key still finds its run.
      const listed = await api<{ items: { id: string; status: string }[] }>(base2, 'GET', '/v1/runs?limit=200');
      expect(new Set(listed.body.items.map((r) => r.id))).toEqual(new Set(all));
      for (const r of listed.body.items) expect(ended.has(r.status) && r.status !== 'needs_replan', `${r.id} is ${r.status}`).toBe(true);
      const again = await api<RunView>(
        base2,
        'POST',
        '/v1/runs',
        { calls: [{ id: 'x', tool: 'quick' }] },
        { 'idempotency-key': 'crash-A' },
      );
      expect(again.status).toBe(200);
      expect(again.body.id).toBe(A);

      // Event seqs are gapless across the restart: the streams cut by the kill resume with
      // Last-Event-ID where they stopped, and a full replay is 1..n.
      for (const id of all) {
        const got = cut.get(id) as SseEvent[];
        const resumed = await readEvents(base2, id, got.at(-1)?.seq ?? 0, [...got]);
        expectGapless(resumed, id);
        const full = await readEvents(base2, id);
        expectGapless(full, id);
        expect(resumed).toEqual(full);
      }
      // The restart shows in the log: A's a3 started twice, a5 failed as outcome_unknown after the crash.
      const aEvents = await readEvents(base2, A);
      expect(aEvents.filter((ev) => ev.type === 'call.started' && ev.callId === 'a3').map((ev) => ev.data.attempt)).toEqual([1, 2]);
      expect(
        aEvents.filter((ev) => ev.type === 'call.failed' && ev.callId === 'a5').map((ev) => (ev.data.error as { code: string }).code),
      ).toEqual(['outcome_unknown']);
    });

    it('SIGTERM: calls that end during the drain are recorded; what still runs after it resumes at the next start', {
      timeout: 60_000,
    }, async () => {
      // The first test's restarted server goes; this test starts its own on another database.
      await second?.stop();
      second = undefined;
      tools.phase = 10;
      tools.holding = true;
      const db2 = await database('drain.db');
      const server = (third = await startServer({ config, db: db2, drainMs: 2000, args: ['--replica-id', 'crash'] }));
      const created = await api<RunView>(server.url, 'POST', '/v1/runs', {
        failure: 'partial',
        calls: [
          { id: 'g1', tool: 'hold_once', args: {} },
          { id: 'g2', tool: 'hold_idem', args: {} },
          { id: 'g3', tool: 'hold_once', args: { other: true } },
          { id: 'g4', tool: 'echo', args: { from: '${g1.output}' } },
        ],
      });
      expect(created.status).toBe(201);
      const G = created.body.id;
      // A client waiting for a run with the longest waitMs must not hold the shutdown up.
      const waiting = fetch(`${server.url}/v1/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'drain-H' },
        body: JSON.stringify({ calls: [{ id: 'h1', tool: 'hold_idem', args: {} }], waitMs: 60_000 }),
      }).then(
        (r) => r.status,
        () => 'connection closed',
      );
      await until('the held calls to reach the tool server', () =>
        ['g1', 'g2', 'g3'].every((c) => tools.of(G, c).length === 1) && tools.attempts.some((a) => a.callId === 'h1') ? true : undefined,
      );

      const stopAt = Date.now();
      server.proc.kill('SIGTERM');
      // The server stops listening as soon as it starts shutting down; from then on it only drains.
      await until('the server to stop listening', async () => {
        try {
          const r = await fetch(`${server.url}/healthz`);
          return r.status === 503 ? true : undefined;
        } catch {
          return true;
        }
      });
      tools.phase = 11;
      tools.release(G, 'g1');
      const exit = await server.exited;
      expect(exit.code, server.output()).toBe(0);
      // It stopped after the drain (2 s), long before the 60 s wait would have run out.
      expect(Date.now() - stopAt).toBeLessThan(30_000);
      expect(['connection closed', 503]).toContain(await waiting);

      tools.phase = 12;
      tools.holding = false;
      second = await startServer({ config, db: db2, args: ['--replica-id', 'crash'] });
      const view = await until('the resumed run to end', async () => {
        const r = await api<RunView>((second as ServerChild).url, 'GET', `/v1/runs/${G}`);
        return r.body.status !== 'running' ? r.body : undefined;
      });
      // g1 ended during the drain: recorded, and not sent again; its dependent ran after the restart.
      expect(call(view, 'g1')).toMatchObject({ status: 'succeeded', attempts: 1, output: { callId: 'g1', phase: 10 } });
      expect(tools.of(G, 'g1')).toHaveLength(1);
      expect(call(view, 'g4')).toMatchObject({ status: 'succeeded', output: { from: { callId: 'g1' } } });
      // g2 (idempotent) and g3 (not) were still running when the drain ran out: they were aborted
      // without their end being recorded, so the restart resumed them like after a crash.
      expect(call(view, 'g2')).toMatchObject({ status: 'succeeded', attempts: 2, output: { attempt: 2, phase: 12 } });
      expect(tools.of(G, 'g2', 12)).toMatchObject([{ attempt: 2, key: `${G}/g2` }]);
      expect(call(view, 'g3')).toMatchObject({ status: 'failed', error: { code: 'outcome_unknown' } });
      expect(tools.of(G, 'g3')).toHaveLength(1);
      expect(view.status).toBe('partial');
      expectGapless(await readEvents((second as ServerChild).url, G), G);
      // The run the waiting client submitted was accepted, so it was resumed too.
      const h = await until("the waiting client's run to end", async () => {
        const r = await api<RunView>(
          (second as ServerChild).url,
          'POST',
          '/v1/runs',
          { calls: [{ id: 'h1', tool: 'hold_idem' }] },
          { 'idempotency-key': 'drain-H' },
        );
        return r.status === 200 && r.body.status !== 'running' ? r.body : undefined;
      });
      expect(h.status).toBe('succeeded');
      expect(call(h, 'h1')).toMatchObject({ attempts: 2, output: { attempt: 2, phase: 12 } });
      await second.stop();
      second = undefined;
    });
  },
);
