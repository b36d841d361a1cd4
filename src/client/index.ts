/**
 * A typed client for toolgraph's HTTP API (`import { ToolgraphClient } from 'toolgraph/client'`). Its
 * types come from the same zod schemas the server validates with. It retries 429 and 503 answers with
 * backoff, honouring `Retry-After`, and its event stream resumes by itself after a dropped connection.
 *
 * @example
 * const tg = new ToolgraphClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: process.env.TOOLGRAPH_KEY });
 * const run = await tg.submit({ calls: [{ id: 'a', tool: 'echo', args: { x: 1 } }] }, { wait: true });
 * for await (const e of tg.events(run.id)) console.log(e.seq, e.type);
 */
import type { z } from 'zod';
import type { CallInput } from '../core/calls.js';
import type { Edge, Diagnostic, CallStatus, RunStatus } from '../core/calls.js';
import type { ReviewSchema, RunSummarySchema } from '../contract/responses.js';
import type { WorkItem } from '../core/view.js';
import { endedRun, openWithHandlers, runWithHandlers, type OpenClientRun, type RunOptions } from './handlers.js';

export type { HandlerContext, OpenClientRun, RunOptions, ToolHandler } from './handlers.js';
export type { WorkItem };

/** An agent's answer for its client tool's attempt: the output, or an error (DESIGN §17). */
export type ClientResult = { token: string; output: unknown } | { token: string; error: { message: string; retryable?: boolean } };

import type { Batch, Run, RunEvent } from './types.js';
export type { Batch, Run, RunEvent } from './types.js';
export type { CallInput, Edge, Diagnostic, CallStatus, RunStatus };

/** An item of `GET /v1/runs`: what the store keeps of a run. */
export type RunSummary = z.infer<typeof RunSummarySchema>;

/** An item of `GET /v1/reviews`. */
export type Review = z.infer<typeof ReviewSchema>;

export interface ClientOptions {
  /** e.g. `http://127.0.0.1:8080` */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Retries of a 429 or 503 answer (or a network error on a safe request). @default 5 */
  maxRetries?: number;
  /** First backoff; doubles per retry unless the server's `Retry-After` says otherwise. @default 250 */
  retryBaseMs?: number;
  /** @default globalThis.fetch */
  fetch?: typeof fetch;
}

/** An error answer from the server: its status and `{ error: { code, message, details } }`. */
export class ToolgraphError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(`${status} ${code}: ${message}`);
  }
}

const ENDED = new Set(['succeeded', 'partial', 'failed', 'needs_replan', 'deadlocked', 'cancelled']);

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

/** Seconds or an HTTP date, in ms; undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const s = Number(header);
  if (Number.isFinite(s) && s >= 0) return s * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

export class ToolgraphClient {
  private readonly base: string;
  private readonly fetch: typeof fetch;
  private readonly maxRetries: number;
  private readonly retryBaseMs: number;

  constructor(private readonly opts: ClientOptions) {
    this.base = opts.baseUrl.replace(/\/+$/, '');
    this.fetch = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.maxRetries = opts.maxRetries ?? 5;
    this.retryBaseMs = opts.retryBaseMs ?? 250;
  }

  /** Submits a batch. With `wait`, waits (in ≤ 60 s steps) until the run ends. */
  async submit(batch: Batch, opts: { idempotencyKey?: string; wait?: boolean | number } = {}): Promise<Run> {
    const waitMs = opts.wait === true ? 60_000 : typeof opts.wait === 'number' ? Math.min(60_000, opts.wait) : batch.waitMs;
    const headers: Record<string, string> = opts.idempotencyKey ? { 'idempotency-key': opts.idempotencyKey } : {};
    const run = await this.request<Run>('POST', '/v1/runs', { ...batch, ...(waitMs !== undefined ? { waitMs } : {}) }, headers);
    if (opts.wait === true && !ENDED.has(run.status)) return this.waitFor(run.id);
    return run;
  }

  /** Waits until the run ends (following its event stream), then returns it. */
  async waitFor(runId: string, opts: { signal?: AbortSignal } = {}): Promise<Run> {
    for await (const e of this.events(runId, opts)) if (e.type === 'run.completed') break;
    return endedRun(this, runId);
  }

  /** The graph a batch would make; what only a run has (`concurrencyKey`, `onConcurrent`, `priority`) is left out. */
  plan(batch: Batch): Promise<{ nodes: unknown[]; edges: Edge[]; generations: string[][]; diagnostics: Diagnostic[] }> {
    const { concurrencyKey: _key, onConcurrent: _on, priority: _priority, ...plain } = batch;
    return this.request('POST', '/v1/plan', plain);
  }

  get(runId: string): Promise<Run> {
    return this.request('GET', `/v1/runs/${encodeURIComponent(runId)}`);
  }

  list(query: { status?: RunStatus[]; tenant?: string; tag?: string[]; limit?: number; cursor?: string } = {}) {
    const q = new URLSearchParams();
    for (const s of query.status ?? []) q.append('status', s);
    for (const t of query.tag ?? []) q.append('tag', t);
    if (query.tenant) q.set('tenant', query.tenant);
    if (query.limit) q.set('limit', String(query.limit));
    if (query.cursor) q.set('cursor', query.cursor);
    const qs = q.toString();
    return this.request<{ items: RunSummary[]; nextCursor: string | null }>('GET', `/v1/runs${qs ? `?${qs}` : ''}`);
  }

  cancel(runId: string): Promise<Run> {
    return this.request('POST', `/v1/runs/${encodeURIComponent(runId)}/cancel`);
  }

  replan(runId: string, calls: CallInput[]): Promise<Run> {
    return this.request('POST', `/v1/runs/${encodeURIComponent(runId)}/replan`, { calls });
  }

  reviews(query: { status?: 'pending' | 'decided'; runId?: string } = {}): Promise<{ items: Review[] }> {
    const q = new URLSearchParams(Object.entries(query).filter(([, v]) => v !== undefined) as [string, string][]).toString();
    return this.request('GET', `/v1/reviews${q ? `?${q}` : ''}`);
  }

  decide(
    reviewId: string,
    decision: { decision: 'approve' | 'reject' | 'edit'; args?: Record<string, unknown>; comment?: string },
  ): Promise<Run> {
    return this.request('POST', `/v1/reviews/${encodeURIComponent(reviewId)}`, decision);
  }

  /**
   * Submits a batch whose client tools (`executor: { kind: client }`) this process runs: each handler
   * runs as its call starts (with an AbortSignal that aborts on timeout or cancel), its output or error
   * is posted, and the promise resolves to the run once it has ended (DESIGN §17). A call whose tool has
   * no handler fails with an error naming it; handlers of tools the batch does not use are ignored.
   *
   * @example
   * const run = await tg.run(
   *   { calls: [{ id: 'w', tool: 'write_file', args: { path: '/x', content: 'hi' } }, { id: 'r', tool: 'read_file', args: { path: '/x' } }] },
   *   { handlers: { write_file: async (a) => fs.writeFile(a.path, a.content), read_file: async (a, { signal }) => fs.readFile(a.path, { encoding: 'utf8', signal }) } },
   * );
   */
  run(batch: Batch, opts: RunOptions): Promise<Run> {
    return runWithHandlers(this, batch, opts);
  }

  /**
   * Like `run`, for a streamed run (DESIGN §10): `add` appends calls as the model writes them (each
   * starts as soon as it is safe, its handler as it starts), `seal` ends the stream, `done` resolves
   * to the ended run.
   */
  open(batch: Omit<Batch, 'calls' | 'open'> & { calls?: Batch['calls'] }, opts: RunOptions): Promise<OpenClientRun> {
    return openWithHandlers(this, batch, opts);
  }

  /** Appends calls to an open (streamed) run; `409` once it is sealed. */
  append(runId: string, calls: CallInput[]): Promise<Run> {
    return this.request('POST', `/v1/runs/${encodeURIComponent(runId)}/calls`, { calls });
  }

  /** Seals an open run: no more calls. */
  seal(runId: string): Promise<Run> {
    return this.request('POST', `/v1/runs/${encodeURIComponent(runId)}/seal`);
  }

  /** The calls of client tools that wait for their agent's result; `waitMs` long-polls for one. */
  work(runId: string, opts: { waitMs?: number } = {}): Promise<{ items: WorkItem[] }> {
    const q = opts.waitMs !== undefined ? `?waitMs=${Math.min(60_000, Math.max(0, Math.round(opts.waitMs)))}` : '';
    return this.request('GET', `/v1/runs/${encodeURIComponent(runId)}/work${q}`);
  }

  /** Answers the waiting attempt of a client tool's call; a `ToolgraphError` 409 `stale_token` when none waits for that token. */
  postResult(runId: string, callId: string, result: ClientResult): Promise<{ runId: string; callId: string; attempt: number }> {
    return this.request('POST', `/v1/runs/${encodeURIComponent(runId)}/calls/${encodeURIComponent(callId)}/result`, result);
  }

  /**
   * A run's events, in order, from `from` (exclusive). A dropped connection is resumed with
   * `Last-Event-ID`, so no event is lost or repeated; the iterator ends when the run does.
   */
  async *events(runId: string, opts: { from?: number; signal?: AbortSignal } = {}): AsyncGenerator<RunEvent> {
    let last = opts.from ?? 0;
    let failures = 0;
    for (;;) {
      let ended = false;
      try {
        const res = await this.send(
          'GET',
          `/v1/runs/${encodeURIComponent(runId)}/events`,
          undefined,
          { 'last-event-id': String(last), accept: 'text/event-stream' },
          opts.signal,
        );
        if (!res.ok) throw await this.errorOf(res);
        for await (const e of parseSse(res.body as ReadableStream<Uint8Array>)) {
          failures = 0;
          if (e.seq <= last) continue;
          last = e.seq;
          yield e;
          if (e.type === 'run.completed') ended = true;
        }
        if (ended) return;
        // Cut before the end: resume after the last event seen.
        failures++;
      } catch (e) {
        if (e instanceof ToolgraphError || opts.signal?.aborted) throw e;
        if (++failures > this.maxRetries) throw e;
      }
      if (failures > this.maxRetries) throw new Error(`the event stream of ${runId} kept closing before the run ended`);
      await sleep(Math.min(5000, this.retryBaseMs * 2 ** failures), opts.signal);
    }
  }

  /** One request with retries of 429/503 (and of network errors for GETs), honouring Retry-After. */
  private async request<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      let res: Response;
      try {
        res = await this.send(method, path, body, headers);
      } catch (e) {
        const retriable = method === 'GET' || headers['idempotency-key'] !== undefined;
        if (!retriable || attempt >= this.maxRetries) throw e;
        await sleep(this.retryBaseMs * 2 ** attempt);
        continue;
      }
      if ((res.status === 429 || res.status === 503) && attempt < this.maxRetries) {
        await res.body?.cancel();
        await sleep(retryAfterMs(res.headers.get('retry-after')) ?? this.retryBaseMs * 2 ** attempt);
        continue;
      }
      if (!res.ok) throw await this.errorOf(res);
      const type = res.headers.get('content-type') ?? '';
      return (type.includes('json') ? await res.json() : await res.text()) as T;
    }
  }

  private send(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
    signal?: AbortSignal,
  ): Promise<Response> {
    const h: Record<string, string> = { ...headers };
    if (this.opts.apiKey) h.authorization = `Bearer ${this.opts.apiKey}`;
    if (body !== undefined) h['content-type'] = 'application/json';
    return this.fetch(`${this.base}${path}`, {
      method,
      headers: h,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      ...(signal ? { signal } : {}),
    });
  }

  private async errorOf(res: Response): Promise<ToolgraphError> {
    const text = await res.text().catch(() => '');
    try {
      const j = JSON.parse(text) as { error?: { code?: string; message?: string; details?: unknown } };
      return new ToolgraphError(res.status, j.error?.code ?? 'unknown', j.error?.message ?? text, j.error?.details);
    } catch {
      return new ToolgraphError(res.status, 'unknown', text.slice(0, 500));
    }
  }
}

/** Parses a text/event-stream body into events (the `data:` JSON of each message). */
export async function* parseSse(body: ReadableStream<Uint8Array>): AsyncGenerator<RunEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, '');
        const data = block
          .split(/\r?\n/)
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).replace(/^ /, ''))
          .join('\n');
        if (data) yield JSON.parse(data) as RunEvent;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
