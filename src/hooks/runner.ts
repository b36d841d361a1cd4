/**
 * The hook runner (DESIGN §14): runs the hooks a `HookRequest` names, in config order, and reports one
 * `HookDecision` per hook that ran. It never throws: a hook that fails, times out or answers something
 * that is not a decision gets its `onError` decision (`deny`: the call fails; `allow`: it goes on),
 * with `error` saying what happened.
 *
 * - `before_call` gets `{ on, runId, callId, tool, tenant, args }` and answers `{ decision: allow | deny
 *   | review, args?, reason? }`. A later hook sees the args an earlier one gave; a `deny` or `review`
 *   ends the chain.
 * - `after_call` gets the same plus `status` and `output` or `error`, and answers `{}`, `{ output }`
 *   (replace) or `{ fail: { message } }`. A later hook sees the output an earlier one gave; a `fail`
 *   ends the chain.
 *
 * @example
 * const runner = createHookRunner(config.hooks);
 * const decisions = await runner.run(request); // [{ hook: 'fs-guard', decision: 'deny', reason: '…', … }]
 */
import { availableParallelism } from 'node:os';
import type { HookConfig } from '../config/hooks-schema.js';
import { DEFAULT_HOOKS_IN_FLIGHT, type HookDecision, type HookRequest } from '../core/hooks.js';
import { ModuleHooks, postHook, type HookCall, type HookEndpoint } from './transports.js';

export interface HookRunner {
  /** Runs the request's hooks; `signal` aborts the one running (it then decides by its `onError`). */
  run(request: HookRequest, signal?: AbortSignal): Promise<HookDecision[]>;
  close(): Promise<void>;
  /** Requests running now (at most `maxInFlight`), and waiting for their turn. */
  readonly inFlight?: number;
  readonly queued?: number;
}

export interface HookRunnerOptions {
  /** Epoch ms for `startedAt` (the engine's clock); default `Date.now`. */
  clock?: () => number;
  /** Most worker threads for module hooks; default the number of cores. */
  maxThreads?: number;
  /**
   * Most hook requests running at once (`limits.hooksInFlight`); those beyond it wait their turn, in
   * the order they came. @default 64
   */
  maxInFlight?: number;
}

/** What a hook receives. */
export interface HookPayload {
  on: HookRequest['on'];
  runId: string;
  callId: string;
  tool: string;
  tenant: string;
  args: Record<string, unknown>;
  status?: 'succeeded' | 'failed';
  output?: unknown;
  error?: HookRequest['error'];
}

/** A hook's answer as a decision, or a string saying why it is not one. */
export function readAnswer(on: HookRequest['on'], answer: unknown): Omit<HookDecision, 'hook' | 'startedAt' | 'durationMs'> | string {
  if (typeof answer !== 'object' || answer === null || Array.isArray(answer)) return 'the answer is not a JSON object';
  const a = answer as Record<string, unknown>;
  if (a.reason !== undefined && typeof a.reason !== 'string') return '`reason` is not a string';
  const reason = a.reason === undefined ? {} : { reason: a.reason as string };
  if (on === 'before_call') {
    const decision = a.decision ?? 'allow';
    if (decision !== 'allow' && decision !== 'deny' && decision !== 'review') return '`decision` is not one of allow, deny, review';
    if (a.args !== undefined && (typeof a.args !== 'object' || a.args === null || Array.isArray(a.args)))
      return '`args` is not a JSON object';
    return { decision, ...reason, ...(a.args !== undefined && decision !== 'deny' ? { args: a.args as Record<string, unknown> } : {}) };
  }
  if (a.fail !== undefined) {
    const f = a.fail as { message?: unknown } | null;
    if (typeof f !== 'object' || f === null || typeof f.message !== 'string') return '`fail` is not { "message": string }';
    return { decision: 'fail', ...reason, fail: { message: f.message } };
  }
  if (Object.hasOwn(a, 'output')) return { decision: 'replace', ...reason, output: a.output };
  return { decision: 'allow', ...reason };
}

export function createHookRunner(hooks: readonly HookConfig[], opts: HookRunnerOptions = {}): HookRunner {
  const clock = opts.clock ?? Date.now;
  const modules = new ModuleHooks(Math.max(1, opts.maxThreads ?? availableParallelism()));
  const slots = new Slots(opts.maxInFlight ?? DEFAULT_HOOKS_IN_FLIGHT);
  const endpoints = hooks.map((h): HookEndpoint | undefined =>
    h.url === undefined ? undefined : { url: new URL(h.url), headers: h.headers },
  );

  async function one(i: number, payload: HookPayload, signal: AbortSignal | undefined): Promise<HookDecision> {
    const hook = hooks[i] as HookConfig;
    const endpoint = endpoints[i];
    const startedAt = clock();
    const t0 = performance.now();
    const call: HookCall = { body: JSON.stringify(payload), request: payload, timeoutMs: hook.timeoutMs, ...(signal ? { signal } : {}) };
    let read: ReturnType<typeof readAnswer>;
    try {
      const answer = endpoint !== undefined ? await postHook(endpoint, call) : await modules.call(hook.module as string, call);
      read = readAnswer(payload.on, answer);
    } catch (err) {
      read = err instanceof Error ? err.message : String(err);
    }
    const timing = { hook: hook.name, startedAt, durationMs: Math.round((performance.now() - t0) * 1000) / 1000 };
    if (typeof read !== 'string') return { ...timing, ...read };
    const error = `hook ${hook.name} failed: ${read}`;
    if (hook.onError === 'allow') return { ...timing, decision: 'allow', error };
    return payload.on === 'before_call'
      ? { ...timing, decision: 'deny', reason: error, error }
      : { ...timing, decision: 'fail', fail: { message: error }, error };
  }

  return {
    async run(request, signal) {
      await slots.take();
      try {
        return await runAll(request, signal);
      } finally {
        slots.give();
      }
    },
    close: () => modules.close(),
    get inFlight() {
      return slots.used;
    },
    get queued() {
      return slots.waiting;
    },
  };

  async function runAll(request: HookRequest, signal: AbortSignal | undefined): Promise<HookDecision[]> {
    const payload: HookPayload = {
      on: request.on,
      runId: request.runId,
      callId: request.callId,
      tool: request.tool.name,
      tenant: request.tenant,
      args: request.args,
    };
    if (request.status !== undefined) payload.status = request.status;
    if (request.status === 'succeeded') payload.output = request.output;
    if (request.error !== undefined) payload.error = request.error;
    const out: HookDecision[] = [];
    for (const i of request.hooks) {
      if (!hooks[i]) continue;
      const d = await one(i, payload, signal);
      out.push(d);
      if (d.decision === 'deny' || d.decision === 'review' || (d.decision === 'fail' && request.status === 'succeeded')) break;
      // On a failed call the hooks only observe: nothing they say changes what the next one sees.
      if (d.args) payload.args = d.args;
      if (d.decision === 'replace' && request.status === 'succeeded') payload.output = d.output;
    }
    return out;
  }
}

/** A counting semaphore, first come first served. */
class Slots {
  used = 0;
  private readonly queue: (() => void)[] = [];

  constructor(private readonly max: number) {}

  get waiting(): number {
    return this.queue.length;
  }

  take(): Promise<void> | void {
    if (this.used < this.max) {
      this.used++;
      return;
    }
    return new Promise((resolve) => this.queue.push(resolve));
  }

  /** Hands the slot to the first waiter, if one waits (it stays taken), else frees it. */
  give(): void {
    const next = this.queue.shift();
    if (next) next();
    else this.used--;
  }
}
