// A run as the dashboard sees it: folded from the run's events (GET /v1/runs/{id}/events) by the
// server's own projection (view.js, generated from src/core/view.ts), plus the timing of every attempt
// for the timeline.
import { RunProjection } from './view.js';
import { limitName } from './waiting.js';

/**
 * @typedef {import('../../core/errors.js').CallError} CallError
 * @typedef {import('../../core/waiting.js').WaitReason} WaitReason
 * @typedef {import('./waiting.js').WaitingView} WaitingView
 * @typedef {import('./api.js').RunEvent} RunEvent
 * @typedef {{ n: number, readyAt?: number, startedAt?: number, endedAt?: number, waitEndAt?: number,
 *   outcome?: 'succeeded'|'failed'|'retry'|'cancelled', error?: CallError, retryAt?: number,
 *   waits?: WaitReason[] }} Attempt — `waits`: what held it back before it started (each `call.waiting`'s
 *   first reason, in order)
 * @typedef {{ on: 'before_call'|'after_call', hook: string, decision: string, from: number, to: number,
 *   reason?: string, error?: string }} HookTime  one hook's call (DESIGN §14)
 * @typedef {{ attempts: Attempt[], hooks: HookTime[], endAt?: number }} Timing  a call's timeline
 * @typedef {import('./view.js').CallView & { index: number, timing: Timing,
 *   review?: { since?: number, decidedAt?: number } }} Call  a call of the projection's view, plus its
 *   place, its timeline, and when its review began and ended
 * @typedef {import('../../core/calls.js').Diagnostic & { callIds: string[] }} CycleDiagnostic
 * @typedef {{ code: string, text: string, on?: string, onAll?: string[], cycle?: string[],
 *   waits?: WaitingView[], since?: string }} Reason  why a call is not done, and what it waits on
 * @typedef {{ waitingFor?: WaitReason[], attempt?: number, error?: CallError | string, at?: number,
 *   startedAt?: number, on?: HookTime['on'], hook?: string, decision?: string, durationMs?: number,
 *   reason?: string }} TimingData  what the timeline reads of an event's data (each field on the
 *   events that carry it: EventPayloads in src/core/events.ts; `error` is text on a `call.hook`)
 */

export class RunModel {
  constructor() {
    /**
     * The run's projection, from its `run.created` on.
     * @type {RunProjection | null}
     */
    this.projection = null;
    this.lastSeq = 0;
    this.t0 = 0;
    /** @type {number | null} */
    this.endAt = null;
    /** Bumped when calls or edges are added: the graph must be laid out again. */
    this.structure = 0;
    /** Calls whose status or details changed since the last render. */
    /** @type {Set<string>} */
    this.changed = new Set();
    this.runChanged = true;
    /** When the newest event happened, server time (ms). */
    this.lastAt = 0;
  }

  /** The run (its view: id, tenant, status, failure, tags, createdAt, endedAt…), or null before `run.created`. */
  get run() {
    return this.projection?.view ?? null;
  }

  /**
   * The calls in submission order: each a call view of the projection plus `index` and `timing`.
   * @returns {Call[]}
   */
  get calls() {
    return /** @type {Call[]} */ (this.projection?.view.calls ?? []);
  }

  get edges() {
    return this.projection?.edges ?? [];
  }

  get generations() {
    return this.projection?.generations ?? [];
  }

  get diagnostics() {
    return this.projection?.view.diagnostics ?? [];
  }

  get replanContext() {
    return this.projection?.view.replanContext ?? null;
  }

  /**
   * @param {string} id
   * @returns {Call | undefined}
   */
  call(id) {
    return /** @type {Call | undefined} */ (this.projection?.call(id));
  }

  /**
   * Applies one event (`{ seq, type, runId, callId?, at, data }`, `at` as text); older or repeated seqs are ignored.
   * @param {RunEvent} e
   */
  apply(e) {
    if (typeof e?.seq !== 'number' || e.seq <= this.lastSeq) return;
    this.lastSeq = e.seq;
    const at = Date.parse(e.at);
    this.lastAt = Math.max(this.lastAt, at);
    if (!this.projection && e.type !== 'run.created') return;
    // The projection takes the scheduler's clock (ms); the API sends the time as text.
    // The same event, typed as the projection takes it (its data as the server wrote it).
    const event = /** @type {import('../../core/events.js').CoreEvent} */ (/** @type {unknown} */ ({ ...e, at, data: e.data ?? {} }));
    const c = e.callId !== undefined ? this.call(e.callId) : undefined;
    const last = c?.timing.attempts[c.timing.attempts.length - 1];
    if (e.type === 'run.created') {
      this.t0 = at;
      this.projection = new RunProjection(event);
    } else this.projection?.apply(event);
    this.addTiming();
    switch (e.type) {
      case 'run.created':
        this.structure++;
        return;
      // biome-ignore lint/suspicious/noFallthroughSwitchClause: a replan is a new step, as a start is, and also reopens the run
      case 'run.replanned':
        this.endAt = null;
      // falls through
      case 'run.started':
      case 'run.calls_added':
      case 'run.sealed':
        this.structure++;
        this.runChanged = true;
        return;
      case 'run.needs_replan':
        this.runChanged = true;
        return;
      case 'run.completed':
        this.endAt = at;
        this.runChanged = true;
        return;
      default:
        if (c) this.applyTiming(c, last, e, at);
    }
  }

  /** Gives calls the projection has just listed their place and an empty timeline. */
  addTiming() {
    const calls = this.calls;
    for (let i = calls.length - 1; i >= 0 && calls[i].timing === undefined; i--) {
      calls[i].index = i;
      calls[i].timing = { attempts: [], hooks: [] };
      this.changed.add(calls[i].id);
      if (i === calls.length - 1) this.structure++;
    }
  }

  /**
   * The timeline of a call's attempts (`last`: its latest attempt before this event).
   * @param {Call} c
   * @param {Attempt | undefined} last
   * @param {RunEvent} e
   * @param {number} at
   */
  applyTiming(c, last, e, at) {
    const d = /** @type {TimingData} */ (e.data ?? {});
    switch (e.type) {
      case 'call.ready': {
        if (!last || last.startedAt !== undefined) c.timing.attempts.push({ n: c.timing.attempts.length + 1, readyAt: at });
        break;
      }
      case 'call.waiting': {
        const w = d.waitingFor?.[0];
        if (!w || !last || last.startedAt !== undefined) return;
        const prev = last.waits?.[last.waits.length - 1];
        if (!prev || prev.kind !== w.kind || prev.key !== w.key) (last.waits ??= []).push(w);
        else if (last.waits) last.waits[last.waits.length - 1] = w;
        break;
      }
      case 'call.awaiting_review':
        // The projection gave the call its review with this event.
        /** @type {NonNullable<Call['review']>} */ (c.review).since = at;
        break;
      case 'review.decided':
        if (!c.review) return;
        c.review.decidedAt = at;
        break;
      case 'call.started': {
        let a = last && last.startedAt === undefined ? last : undefined;
        if (!a) {
          a = { n: /** @type {number} */ (d.attempt), readyAt: at };
          c.timing.attempts.push(a);
        }
        a.n = /** @type {number} */ (d.attempt);
        a.startedAt = at;
        break;
      }
      case 'call.retry_scheduled':
        if (last) Object.assign(last, { endedAt: at, outcome: 'retry', error: d.error, retryAt: d.at });
        break;
      case 'call.succeeded':
        if (last) Object.assign(last, { endedAt: at, outcome: 'succeeded' });
        break;
      case 'call.failed':
        if (last && last.startedAt !== undefined && last.endedAt === undefined)
          Object.assign(last, { endedAt: at, outcome: 'failed', error: d.error });
        break;
      case 'call.blocked':
        c.timing.endAt = at;
        break;
      case 'call.cancelled':
        c.timing.endAt = at;
        if (last && last.endedAt === undefined) {
          if (last.startedAt !== undefined) Object.assign(last, { endedAt: at, outcome: 'cancelled' });
          else Object.assign(last, { waitEndAt: at, outcome: 'cancelled' });
        }
        break;
      case 'call.compensated':
        break;
      case 'call.hook': {
        const from = typeof d.startedAt === 'number' ? d.startedAt : at;
        // A call.hook's data has its hook, on and decision.
        const h = /** @type {HookTime} */ ({ on: d.on, hook: d.hook, decision: d.decision, from, to: from + (d.durationMs ?? 0) });
        if (d.reason !== undefined) h.reason = d.reason;
        if (d.error !== undefined) h.error = /** @type {string} */ (d.error);
        c.timing.hooks.push(h);
        // Hook time is not a wait for a limit: the wait starts once before_call decided.
        if (d.on === 'before_call' && last && last.startedAt === undefined) last.readyAt = at;
        break;
      }
      default:
        return;
    }
    this.touch(c);
  }

  /** @param {Call} c */
  touch(c) {
    this.changed.add(c.id);
  }

  /** Calls on a reported cycle (`{ code: 'cycle', callIds }`) or blocked with code `cycle`. */
  cycles() {
    const list = /** @type {CycleDiagnostic[]} */ (this.diagnostics.filter((d) => d.code === 'cycle' && Array.isArray(d.callIds)));
    /** @type {Set<string>} */
    const members = new Set();
    for (const d of list) for (const id of d.callIds) members.add(id);
    for (const c of this.calls) if (c.blockedBy?.code === 'cycle') members.add(c.id);
    /** @type {Set<string>} */
    const edges = new Set();
    for (const d of list) for (let i = 0; i + 1 < d.callIds.length; i++) edges.add(`${d.callIds[i]}→${d.callIds[i + 1]}`);
    return { list, members, edges };
  }

  counts() {
    /** @type {Record<string, number>} */
    const out = {};
    for (const c of this.calls) out[c.status] = (out[c.status] ?? 0) + 1;
    return out;
  }

  /**
   * Direct predecessors of a call that have not ended: what a pending call waits on.
   * @param {Call} c
   */
  waitsOn(c) {
    /** @type {Set<string>} */
    const seen = new Set();
    /** @type {Call[]} */
    const out = [];
    for (const id of c.dependsOn) {
      const p = this.call(id);
      if (!p || seen.has(id)) continue;
      seen.add(id);
      if (p.status !== 'succeeded' && p.status !== 'failed' && p.status !== 'cancelled' && p.status !== 'blocked') out.push(p);
    }
    return out;
  }

  /**
   * Why a call is stuck or waiting, in words, and the call it waits on (if one).
   * @param {Call} c
   * @returns {Reason | null}
   */
  reason(c) {
    switch (c.status) {
      case 'blocked': {
        const b = /** @type {Partial<CallError>} */ (c.blockedBy ?? c.error ?? {});
        const on = b.callId;
        const cycle = /** @type {{ cycle?: string[] } | undefined} */ (b.details)?.cycle;
        return { code: b.code ?? 'blocked', text: b.message ?? 'blocked', on, cycle };
      }
      case 'pending': {
        if (c.review?.decision === 'approve' || c.review?.decision === 'edit')
          return { code: 'pending', text: 'approved; waiting to be scheduled' };
        const on = this.waitsOn(c);
        if (on.length === 0) return { code: 'pending', text: c.timing.attempts.length > 0 ? 'waiting to retry' : 'waiting' };
        return {
          code: 'waiting',
          text: `waits on ${on.map((p) => `${p.id} (${p.status.replace(/_/g, ' ')})`).join(', ')}`,
          on: on[0].id,
          onAll: on.map((p) => p.id),
        };
      }
      case 'ready':
        if (c.waitingFor?.length)
          return {
            code: `waiting for ${c.waitingFor[0].kind === 'lock' ? 'a lock' : 'a limit'}`,
            text: `waiting for ${c.waitingFor.map((w) => limitName(w)).join(', ')}`,
            waits: c.waitingFor,
            since: c.waitingSince,
          };
        return { code: 'limit', text: 'ready; waiting for a free slot under the limits (global, tenant, tool, per run, resource or rate)' };
      case 'awaiting_review':
        return { code: 'review', text: `awaiting a human review: ${c.review?.reason ?? ''}` };
      case 'failed':
        return { code: c.error?.code ?? 'failed', text: c.error?.message ?? 'failed' };
      case 'cancelled':
        return { code: c.error?.code ?? 'cancelled', text: c.error?.message ?? 'cancelled' };
      default:
        return null;
    }
  }
}
