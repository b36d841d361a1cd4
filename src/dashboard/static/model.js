// A run as the dashboard sees it: folded from the run's events (GET /v1/runs/{id}/events), as the
// server folds them (src/core/view.ts), plus the timing of every attempt for the timeline.

/**
 * @typedef {{ n: number, readyAt?: number, startedAt?: number, endedAt?: number, waitEndAt?: number,
 *   outcome?: 'succeeded'|'failed'|'retry'|'cancelled', error?: object, retryAt?: number }} Attempt
 */

export class RunModel {
  constructor() {
    this.run = null;
    this.calls = [];
    this.byId = new Map();
    this.edges = [];
    this.generations = [];
    this.diagnostics = [];
    this.replanContext = null;
    this.lastSeq = 0;
    this.t0 = 0;
    this.endAt = null;
    /** Bumped when calls or edges are added: the graph must be laid out again. */
    this.structure = 0;
    /** Calls whose status or details changed since the last render. */
    this.changed = new Set();
    this.runChanged = true;
    /** When the newest event happened, server time (ms). */
    this.lastAt = 0;
  }

  call(id) {
    return this.byId.get(id);
  }

  /** Applies one event (`{ seq, type, runId, callId?, at, data }`); older or repeated seqs are ignored. */
  apply(e) {
    if (typeof e?.seq !== 'number' || e.seq <= this.lastSeq) return;
    this.lastSeq = e.seq;
    const at = Date.parse(e.at);
    this.lastAt = Math.max(this.lastAt, at);
    const d = e.data ?? {};
    if (e.type === 'run.created') {
      this.t0 = at;
      this.run = { id: e.runId, tenant: d.tenant, status: 'running', failure: d.failure, tags: d.tags ?? {}, createdAt: e.at, endedAt: null };
      this.addCalls(d.calls ?? []);
      return;
    }
    if (!this.run) return;
    const c = e.callId !== undefined ? this.byId.get(e.callId) : undefined;
    switch (e.type) {
      case 'run.replanned':
        this.addCalls(d.calls ?? []);
        this.run.status = 'running';
        this.run.endedAt = null;
        this.endAt = null;
        this.replanContext = null;
      // falls through
      case 'run.started':
        for (const edge of d.edges ?? []) {
          this.edges.push(edge);
          this.byId.get(edge.to)?.dependsOn.push(edge.from);
        }
        this.generations = d.generations ?? [];
        this.diagnostics.push(...(d.diagnostics ?? []));
        this.structure++;
        this.runChanged = true;
        return;
      case 'run.needs_replan':
        this.replanContext = d.replanContext ?? null;
        this.runChanged = true;
        return;
      case 'run.completed':
        this.run.status = d.status;
        this.run.endedAt = e.at;
        this.endAt = at;
        this.runChanged = true;
        return;
      case 'review.decided':
        if (c?.review) {
          c.review.decision = d.decision;
          c.review.decidedAt = at;
          if (d.comment !== undefined) c.review.comment = d.comment;
          if (d.args) c.resolvedArgs = d.args;
          if (d.decision !== 'reject') c.status = 'pending';
          this.touch(c);
        }
        return;
      default:
        if (c) this.applyCall(c, e, at, d);
    }
  }

  applyCall(c, e, at, d) {
    const last = c.timing.attempts[c.timing.attempts.length - 1];
    switch (e.type) {
      case 'call.ready': {
        c.status = 'ready';
        if (!last || last.startedAt !== undefined) c.timing.attempts.push({ n: c.timing.attempts.length + 1, readyAt: at });
        break;
      }
      case 'call.awaiting_review':
        c.status = 'awaiting_review';
        c.review = { reason: d.reason, since: at };
        c.resolvedArgs = d.args;
        break;
      case 'call.started': {
        c.status = 'running';
        c.attempts = d.attempt;
        c.startedAt ??= e.at;
        c.resolvedArgs = d.args;
        let a = last && last.startedAt === undefined ? last : undefined;
        if (!a) {
          a = { n: d.attempt, readyAt: at };
          c.timing.attempts.push(a);
        }
        a.n = d.attempt;
        a.startedAt = at;
        break;
      }
      case 'call.retry_scheduled':
        c.status = 'pending';
        c.error = d.error;
        if (last) Object.assign(last, { endedAt: at, outcome: 'retry', error: d.error, retryAt: d.at });
        break;
      case 'call.succeeded':
        c.status = 'succeeded';
        c.output = d.output;
        c.error = null;
        c.endedAt = e.at;
        if (last) Object.assign(last, { endedAt: at, outcome: 'succeeded' });
        break;
      case 'call.failed':
        c.status = 'failed';
        c.error = d.error;
        c.endedAt = e.at;
        if (last && last.startedAt !== undefined && last.endedAt === undefined) Object.assign(last, { endedAt: at, outcome: 'failed', error: d.error });
        break;
      case 'call.blocked':
        c.status = 'blocked';
        c.blockedBy = d.blockedBy;
        c.endedAt = e.at;
        c.timing.endAt = at;
        break;
      case 'call.cancelled':
        c.status = 'cancelled';
        c.error = d.reason;
        c.endedAt = e.at;
        c.timing.endAt = at;
        if (last && last.endedAt === undefined) {
          if (last.startedAt !== undefined) Object.assign(last, { endedAt: at, outcome: 'cancelled' });
          else Object.assign(last, { waitEndAt: at, outcome: 'cancelled' });
        }
        break;
      case 'call.compensated':
        c.compensation = { status: d.status };
        if (d.output !== undefined) c.compensation.output = d.output;
        if (d.error !== undefined) c.compensation.error = d.error;
        break;
      default:
        return;
    }
    this.touch(c);
  }

  touch(c) {
    this.changed.add(c.id);
  }

  addCalls(calls) {
    for (const call of calls) {
      if (this.byId.has(call.id)) continue;
      const v = {
        id: call.id,
        tool: call.tool,
        args: call.args ?? {},
        index: this.calls.length,
        status: 'pending',
        dependsOn: [],
        attempts: 0,
        output: null,
        error: null,
        blockedBy: null,
        startedAt: null,
        endedAt: null,
        timing: { attempts: [] },
      };
      this.calls.push(v);
      this.byId.set(v.id, v);
      this.changed.add(v.id);
    }
    this.structure++;
  }

  /** Calls on a reported cycle (`{ code: 'cycle', callIds }`) or blocked with code `cycle`. */
  cycles() {
    const list = this.diagnostics.filter((d) => d.code === 'cycle' && Array.isArray(d.callIds));
    const members = new Set();
    for (const d of list) for (const id of d.callIds) members.add(id);
    for (const c of this.calls) if (c.blockedBy?.code === 'cycle') members.add(c.id);
    const edges = new Set();
    for (const d of list) for (let i = 0; i + 1 < d.callIds.length; i++) edges.add(`${d.callIds[i]}→${d.callIds[i + 1]}`);
    return { list, members, edges };
  }

  counts() {
    const out = {};
    for (const c of this.calls) out[c.status] = (out[c.status] ?? 0) + 1;
    return out;
  }

  /** Direct predecessors of a call that have not ended: what a pending call waits on. */
  waitsOn(c) {
    const seen = new Set();
    const out = [];
    for (const id of c.dependsOn) {
      const p = this.byId.get(id);
      if (!p || seen.has(id)) continue;
      seen.add(id);
      if (p.status !== 'succeeded' && p.status !== 'failed' && p.status !== 'cancelled' && p.status !== 'blocked') out.push(p);
    }
    return out;
  }

  /** Why a call is stuck or waiting, in words, and the call it waits on (if one). */
  reason(c) {
    switch (c.status) {
      case 'blocked': {
        const b = c.blockedBy ?? c.error ?? {};
        const on = b.callId;
        const cycle = b.details?.cycle;
        return { code: b.code ?? 'blocked', text: b.message ?? 'blocked', on, cycle };
      }
      case 'pending': {
        if (c.review?.decision === 'approve' || c.review?.decision === 'edit') return { code: 'pending', text: 'approved; waiting to be scheduled' };
        const on = this.waitsOn(c);
        if (on.length === 0) return { code: 'pending', text: c.timing.attempts.length > 0 ? 'waiting to retry' : 'waiting' };
        return { code: 'waiting', text: `waits on ${on.map((p) => `${p.id} (${p.status.replace(/_/g, ' ')})`).join(', ')}`, on: on[0].id, onAll: on.map((p) => p.id) };
      }
      case 'ready':
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
