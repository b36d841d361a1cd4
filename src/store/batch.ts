/**
 * Turns a batch of events into the writes that store them, after checking the whole batch against
 * the log's rules. Both backends call `planBatch` and then apply its steps, so they agree on what an
 * event means; since every check happens here, before anything is written, a rejected batch leaves
 * nothing behind (and applying the steps cannot fail on a rule).
 *
 * What an event changes besides being stored:
 * - `run.created` (the run's seq 1, and only there): creates the run — tenant, failure, tags, calls,
 *   optional `idempotencyKey` (unique per tenant) — with status `running` (`queued` when `held`);
 * - `run.started` with `released` (a held run starts): status `running`;
 * - `run.replanned`: status back to `running`, not ended, its `calls` added to the call count;
 * - `run.completed`: status `data.status`, ended at the event's time;
 * - `call.awaiting_review`: opens review `rev_<runId>_<seq>` (the tool comes from the run's calls);
 * - `review.decided`: closes the call's pending review (nothing if it has none); so do
 *   `call.cancelled` and `call.blocked` (a call that ends while awaiting review needs no decision).
 */
import { RUN_STATUSES, type RunStatus } from '../core/calls.js';
import type { RunEvent } from '../core/events.js';
import { StoreError } from './errors.js';
import type { ReviewRow, RunRow } from './rows.js';

/** What the planner must know of the stored state. */
export interface StoredState {
  /**
   * The run's last seq; 0 when it has no events. `creating`: asked for a `run.created`, which a backend
   * may answer with 0 without looking when its own unique key refuses a second run of one id (the
   * SQLite store's writer thread; see `appendOnWriter`).
   */
  lastSeq(runId: string, creating?: boolean): number;
  tenantOf(runId: string): string | undefined;
  idempotencyOwner(tenant: string, key: string): string | undefined;
  /** The tool of a call the run's `run.created` or `run.replanned` listed. */
  toolOf(runId: string, callId: string): string | undefined;
}

/** An event as stored: `data` serialized once, for both backends. */
export interface EventRow {
  run_id: string;
  seq: number;
  type: string;
  call_id: string | null;
  at: number;
  data: string;
}

export type Step =
  | { kind: 'createRun'; run: Omit<RunRow, 'created_seq'>; tags: [string, string][] }
  | { kind: 'event'; event: EventRow }
  | { kind: 'setStatus'; runId: string; status: RunStatus; endedAt: number | null; addCalls: number }
  | { kind: 'openReview'; review: ReviewRow }
  | { kind: 'closeReview'; runId: string; callId: string; decision: string; at: number };

export interface BatchPlan {
  steps: Step[];
  /** Each run's last seq once the batch is stored. */
  lastSeqs: Map<string, number>;
}

const STATUSES: ReadonlySet<string> = new Set(RUN_STATUSES);

export function planBatch(events: readonly RunEvent[], state: StoredState): BatchPlan {
  const steps: Step[] = [];
  const lastSeqs = new Map<string, number>();
  // Runs created and calls listed earlier in this same batch.
  const tenants = new Map<string, string>();
  const tools = new Map<string, Map<string, string>>();
  const keys = new Map<string, string>();

  for (const e of events) {
    if (typeof e.runId !== 'string' || e.runId === '') throw invalid(e, 'it has no runId');
    if (!Number.isInteger(e.seq)) throw invalid(e, `its seq is ${String(e.seq)}, not an integer`);
    if (typeof e.at !== 'number' || !Number.isFinite(e.at)) throw invalid(e, 'its `at` is not a number');
    const last = lastSeqs.get(e.runId) ?? state.lastSeq(e.runId, e.type === 'run.created');
    if (e.seq !== last + 1) {
      throw new StoreError(
        'seq_out_of_order',
        `event ${e.type} of run ${e.runId} has seq ${e.seq}, but the next seq of that run is ${last + 1}`,
      );
    }
    lastSeqs.set(e.runId, e.seq);
    if ((e.seq === 1) !== (e.type === 'run.created')) {
      throw invalid(e, e.seq === 1 ? 'a run must begin with run.created' : 'run.created must be the first event of its run');
    }
    if (e.type === 'run.created') {
      // Typed, but checked all the same: what is stored must hold up when it is read back.
      const data = e.data;
      const t = data.tenant;
      if (typeof t !== 'string' || t === '') throw invalid(e, 'data.tenant is not a non-empty string');
      const tags: unknown = data.tags ?? {};
      if (typeof tags !== 'object' || tags === null || Array.isArray(tags) || Object.values(tags).some((v) => typeof v !== 'string')) {
        throw invalid(e, 'data.tags is not an object of strings');
      }
      const key: unknown = data.idempotencyKey ?? null;
      if (key !== null && typeof key !== 'string') throw invalid(e, 'data.idempotencyKey is not a string');
      if (key !== null) {
        const owner = keys.get(`${t}\u0000${key}`) ?? state.idempotencyOwner(t, key);
        if (owner !== undefined) {
          throw new StoreError(
            'duplicate_idempotency_key',
            `run ${e.runId}: tenant ${t} used idempotency key ${JSON.stringify(key)} for run ${owner} already`,
          );
        }
        keys.set(`${t}\u0000${key}`, e.runId);
      }
      tenants.set(e.runId, t);
      const callCount = listCalls(e, data.calls, tools);
      const run = {
        id: e.runId,
        tenant: t,
        // A run held behind an earlier run of its concurrency key (DESIGN §4) is queued until run.started.
        status: data.held === true ? ('queued' as const) : ('running' as const),
        failure: typeof data.failure === 'string' ? data.failure : '',
        tags: JSON.stringify(tags),
        created_at: e.at,
        ended_at: null,
        call_count: callCount,
        idempotency_key: key,
      };
      steps.push({ kind: 'createRun', run, tags: Object.entries(data.tags ?? {}) });
    }

    steps.push({
      kind: 'event',
      event: { run_id: e.runId, seq: e.seq, type: e.type, call_id: e.callId ?? null, at: e.at, data: JSON.stringify(e.data ?? {}) },
    });

    switch (e.type) {
      case 'run.started':
        if (e.data.released === true) steps.push({ kind: 'setStatus', runId: e.runId, status: 'running', endedAt: null, addCalls: 0 });
        break;
      case 'run.replanned':
        steps.push({ kind: 'setStatus', runId: e.runId, status: 'running', endedAt: null, addCalls: listCalls(e, e.data.calls, tools) });
        break;
      case 'run.completed': {
        const status = e.data.status;
        if (typeof status !== 'string' || !STATUSES.has(status))
          throw invalid(e, `data.status ${JSON.stringify(status)} is not a run status`);
        steps.push({ kind: 'setStatus', runId: e.runId, status, endedAt: e.at, addCalls: 0 });
        break;
      }
      case 'call.awaiting_review': {
        const callId = e.callId;
        if (callId === undefined) throw invalid(e, 'it has no callId');
        const tool = tools.get(e.runId)?.get(callId) ?? state.toolOf(e.runId, callId);
        if (tool === undefined) throw invalid(e, `its run lists no call ${callId}`);
        steps.push({
          kind: 'openReview',
          review: {
            id: `rev_${e.runId}_${e.seq}`,
            run_id: e.runId,
            call_id: callId,
            tenant: (tenants.get(e.runId) ?? state.tenantOf(e.runId)) as string,
            tool,
            args: JSON.stringify(e.data.args ?? {}),
            reason: typeof e.data.reason === 'string' ? e.data.reason : String(e.data.reason ?? ''),
            status: 'pending',
            decision: null,
            created_at: e.at,
            decided_at: null,
          },
        });
        break;
      }
      case 'review.decided':
        if (e.callId === undefined) throw invalid(e, 'it has no callId');
        if (typeof e.data.decision !== 'string') throw invalid(e, 'data.decision is not a string');
        steps.push({ kind: 'closeReview', runId: e.runId, callId: e.callId, decision: e.data.decision, at: e.at });
        break;
      case 'call.cancelled':
      case 'call.blocked':
        // A call that ends while it awaits review (its run cancelled or failing fast) needs no decision.
        if (e.callId !== undefined)
          steps.push({
            kind: 'closeReview',
            runId: e.runId,
            callId: e.callId,
            decision: e.type === 'call.cancelled' ? 'cancelled' : 'blocked',
            at: e.at,
          });
        break;
    }
  }
  return { steps, lastSeqs };
}

/**
 * Notes the tool of each call a `run.created` or `run.replanned` lists (in `tools`, per run); returns how
 * many it lists. (Not a closure in `planBatch`'s loop: that would be one more function per event.)
 */
function listCalls(e: RunEvent, list: unknown, tools: Map<string, Map<string, string>>): number {
  if (!Array.isArray(list)) throw invalid(e, 'data.calls is not a list');
  let m = tools.get(e.runId);
  if (!m) tools.set(e.runId, (m = new Map()));
  for (const c of list as { id?: unknown; tool?: unknown }[]) {
    if (typeof c?.id !== 'string' || typeof c.tool !== 'string') throw invalid(e, 'a call in data.calls lacks an id or tool');
    m.set(c.id, c.tool);
  }
  return list.length;
}

function invalid(e: RunEvent, why: string): StoreError {
  return new StoreError('invalid_event', `event ${String(e.type)} (seq ${String(e.seq)}) of run ${String(e.runId)}: ${why}`);
}
