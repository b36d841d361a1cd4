/**
 * Recordings (DESIGN §8): one self-contained JSON document per run, derived from its event log alone.
 * It carries the batch, the config that mattered (the manifests of the tools used, policy, limits,
 * defaults, which calls hooks were for), the estimates that ranked ready calls, every attempt with its
 * time and outcome, hook decisions, reviews, replans, a cancel, and the result. Times are ms from the run's `run.created`.
 *
 * `recordingOf` is also how replay describes what it did: it folds the replay's (virtual-time) events
 * the same way, so recorded and replayed runs are compared as two documents of one shape.
 */
import type { CallInput } from '../core/calls.js';
import type { CallError } from '../core/errors.js';
import type { CoreEvent, EventPayloads, StartWait } from '../core/events.js';
import type { Catalog, Defaults, Limits, Policy, ToolManifest } from '../core/tool.js';
import { RunProjection } from '../core/view.js';
import { RECORDING_FORMAT, type RecordedAttempt, type RecordedHook, type RecordedWait, type Recording } from '../contract/recording.js';
import type { HookMatcher } from '../core/hooks.js';

/** What a recording needs from a config (a loaded `Config` is one). */
export interface RecordingConfig {
  tools: readonly ToolManifest[];
  catalog: Catalog;
  policy: Policy;
  limits: Limits;
  defaults: Defaults;
  /** Hooks (DESIGN §14); only which calls they are for is recorded. */
  hooks?: readonly HookMatcher[];
}

/** Tools that a run used: its calls' tools and the tools that compensate them. */
function usedTools(config: RecordingConfig, calls: readonly CallInput[]): ToolManifest[] {
  const names = new Set(calls.map((c) => c.tool));
  for (const n of [...names]) {
    const m = config.catalog.get(n);
    if (m?.compensate) names.add(m.compensate.tool);
  }
  return config.catalog
    .list()
    .filter((t) => names.has(t.name))
    .map(redact);
}

/** Header values can hold secrets; a recording never does. */
function redact(t: ToolManifest): ToolManifest {
  if (t.executor.kind !== 'http' || !t.executor.headers) return t;
  const headers = Object.fromEntries(Object.keys(t.executor.headers).map((k) => [k, '[redacted]']));
  return { ...t, executor: { ...t.executor, headers } };
}

/** The config's hooks as a recording keeps them: which calls they are for, not where they live. */
function hooksOf(config: RecordingConfig): { hooks?: HookMatcher[] } {
  if (!config.hooks || config.hooks.length === 0) return {};
  return { hooks: config.hooks.map((h) => ({ on: h.on, name: h.name, match: { ...h.match } })) };
}

function recordedHook(
  callId: string,
  d: EventPayloads['call.hook'],
  atMs: number,
  asked: { askedMs?: number; appliedMs: number },
): RecordedHook {
  return {
    callId,
    on: d.on,
    hook: d.hook,
    atMs,
    durationMs: d.durationMs,
    ...(asked.askedMs !== undefined ? { askedMs: asked.askedMs } : {}),
    appliedMs: asked.appliedMs,
    decision: d.decision,
    ...(d.reason !== undefined ? { reason: d.reason } : {}),
    ...(d.args !== undefined ? { args: d.args } : {}),
    ...(Object.hasOwn(d, 'output') ? { output: d.output } : {}),
    ...(d.fail !== undefined ? { fail: d.fail } : {}),
    ...(d.error !== undefined ? { error: d.error } : {}),
  };
}

/**
 * Derives the recording of one run from its events (the run's own, in order, starting with
 * `run.created`). An attempt still running when the events end has no outcome and is left out.
 *
 * @example
 * const rec = recordingOf(store.events(runId), config);
 * writeFileSync('run.json', JSON.stringify(rec, null, 2));
 */
export function recordingOf(events: readonly CoreEvent[], config: RecordingConfig): Recording {
  const created = events[0] as CoreEvent;
  if (created.type !== 'run.created') throw new Error(`a run's first event must be run.created, got ${created.type}`);
  const t0 = created.at;
  const ms = (at: number) => at - t0;
  const cd = created.data;
  const allCalls: CallInput[] = [...cd.calls];
  const started: (RecordedAttempt & { open?: boolean })[] = [];
  const open = new Map<string, RecordedAttempt & { open?: boolean }>();
  const ready = new Map<string, number>();
  const rec: Recording = {
    format: RECORDING_FORMAT,
    run: { id: created.runId, tenant: cd.tenant, failure: cd.failure, tags: cd.tags },
    config: configSection(config, []),
    calls: [...cd.calls],
    ...(cd.estimates ? { estimates: cd.estimates } : {}),
    replans: [],
    reviews: [],
    attempts: [],
    result: { status: 'running', calls: [] },
  };
  // An attempt whose after_call hooks ran ended when the first of them was called (DESIGN §14).
  const hooked = new Map<string, number>();
  const close = (e: CoreEvent, fields: Partial<RecordedAttempt> & { ok: boolean }) => {
    const a = open.get(e.callId as string);
    if (!a) return;
    open.delete(e.callId as string);
    delete a.open;
    Object.assign(a, { endMs: hooked.get(a.callId) ?? ms(e.at) }, fields);
    hooked.delete(a.callId);
  };
  let lastAt = t0;
  for (const e of events) {
    const prevAt = lastAt;
    lastAt = e.at;
    switch (e.type) {
      case 'run.resumed':
        // What ran when the owner stopped was lost with it: no outcome, ended when the run was taken back.
        for (const a of open.values()) Object.assign(a, { endMs: ms(e.at), lost: true });
        for (const a of open.values()) delete a.open;
        open.clear();
        hooked.clear();
        (rec.resumes ??= []).push({ atMs: ms(e.at), lastMs: ms(prevAt) });
        break;
      case 'call.ready':
        ready.set(e.callId as string, ms(e.at));
        break;
      case 'call.started': {
        const readyMs = ready.get(e.callId as string);
        const waits = waitsOf(e.data.waited, ms(e.at), ms);
        const a = {
          callId: e.callId as string,
          attempt: e.data.attempt,
          ...(readyMs !== undefined ? { readyMs } : {}),
          startMs: ms(e.at),
          endMs: ms(e.at),
          ok: false,
          ...(waits ? { waits } : {}),
          open: true,
        };
        started.push(a);
        open.set(a.callId, a);
        break;
      }
      case 'call.succeeded':
        close(e, { ok: true, output: e.data.output });
        break;
      case 'call.failed':
        close(e, {
          ok: false,
          error: e.data.error,
          ...(e.data.retryable !== undefined ? { retryable: e.data.retryable } : {}),
          ...(e.data.pauseMs !== undefined ? { pauseMs: e.data.pauseMs } : {}),
          ...(e.data.pauseStatus !== undefined ? { pauseStatus: e.data.pauseStatus } : {}),
        });
        break;
      case 'call.retry_scheduled': {
        const d = e.data;
        close(e, {
          ok: false,
          error: d.error,
          retryable: true,
          ...(d.retryAfterMs !== undefined ? { retryAfterMs: d.retryAfterMs } : {}),
          ...(d.pauseMs !== undefined ? { pauseMs: d.pauseMs } : {}),
          ...(d.pauseStatus !== undefined ? { pauseStatus: d.pauseStatus } : {}),
          ...(typeof d.at === 'number' ? { retryAtMs: ms(d.at) } : {}),
        });
        break;
      }
      case 'call.cancelled': {
        close(e, { ok: false, error: e.data.reason });
        // Cancelled by a newer run of its concurrency key (DESIGN §4): replay cancels the same way.
        const by = (e.data.reason.details as { runId?: unknown } | undefined)?.runId;
        if (e.data.reason.code === 'superseded' && typeof by === 'string') rec.supersededBy = by;
        break;
      }
      case 'call.compensated': {
        const d = e.data;
        // Without `startedAt` the compensation never started (no such tool, unresolvable args).
        if (typeof d.startedAt !== 'number') break;
        started.push({
          callId: e.callId as string,
          attempt: 1,
          startMs: ms(d.startedAt),
          endMs: ms(e.at),
          ok: d.status === 'succeeded',
          ...(d.status === 'succeeded' && d.output !== undefined ? { output: d.output } : {}),
          ...(d.status === 'failed' && d.error !== undefined ? { error: d.error } : {}),
          compensation: true,
        });
        break;
      }
      case 'call.hook': {
        const callId = e.callId as string;
        // The scheduler asked for before_call hooks as the call became ready, and for after_call hooks
        // as its attempt ended (`askedAt`), which is the attempt's recorded end. Events stored before
        // `askedAt` was kept give the time the first hook was called instead: a commit later, so a start
        // that the end let go could seem to come before it.
        const startedMs = ms(e.data.startedAt);
        if (e.data.on === 'after_call' && open.has(callId) && !hooked.has(callId))
          hooked.set(callId, e.data.askedAt !== undefined ? ms(e.data.askedAt) : startedMs);
        const askedMs = e.data.on === 'before_call' ? ready.get(callId) : hooked.get(callId);
        const h = recordedHook(callId, e.data, startedMs, { ...(askedMs !== undefined ? { askedMs } : {}), appliedMs: ms(e.at) });
        (rec.hooks ??= []).push(h);
        break;
      }
      case 'review.decided': {
        const d = e.data;
        rec.reviews.push({
          callId: e.callId as string,
          atMs: ms(e.at),
          decision: d.decision,
          ...(d.args ? { args: d.args } : {}),
          ...(d.comment !== undefined ? { comment: d.comment } : {}),
        });
        break;
      }
      case 'run.completed':
        if (typeof e.data.cancelledAt === 'number') rec.cancelledAtMs = ms(e.data.cancelledAt);
        rec.result.endMs = ms(e.at);
        break;
      case 'run.calls_added':
        for (const c of e.data.calls) {
          rec.calls.push({ ...c, atMs: ms(e.at) });
          allCalls.push(c);
        }
        break;
      case 'run.sealed':
        rec.sealedAtMs = ms(e.at);
        break;
      case 'run.started':
        if (e.data.released) rec.releasedAtMs = ms(e.at);
        break;
      case 'run.tool_paused': {
        const d = e.data;
        (rec.pauses ??= []).push({
          atMs: ms(e.at),
          tool: d.tool,
          ...(d.key !== undefined ? { key: d.key } : {}),
          untilMs: ms(d.until),
          ...(d.status !== undefined ? { status: d.status } : {}),
        });
        break;
      }
      case 'run.replanned':
        rec.replans.push({ atMs: ms(e.at), calls: e.data.calls });
        allCalls.push(...e.data.calls);
        break;
      default:
        break;
    }
  }
  rec.attempts = started.filter((a) => !a.open);
  rec.config.tools = usedTools(config, allCalls);
  const view = RunProjection.of(events).view;
  rec.result.status = view.status;
  rec.result.calls = view.calls.map((c) => ({
    id: c.id,
    status: c.status,
    ...(c.status === 'succeeded' ? { output: c.output } : {}),
    ...((c.error ?? c.blockedBy) ? { error: (c.error ?? c.blockedBy) as CallError } : {}),
    ...(c.compensation ? { compensation: c.compensation } : {}),
  }));
  return rec;
}

/** A start's outside waits (`call.started`'s `waited`), on the recording's clock. */
function waitsOf(w: StartWait | undefined, startMs: number, ms: (at: number) => number): RecordedWait[] | undefined {
  if (w === undefined) return undefined;
  const out: RecordedWait[] = [];
  const asked = w.asked !== undefined ? ms(w.asked) : undefined;
  if (w.outside) out.push({ kind: 'turn', fromMs: ms(w.since), toMs: asked ?? startMs });
  if (asked !== undefined) out.push({ kind: 'permit', fromMs: asked, toMs: startMs });
  return out.length > 0 ? out : undefined;
}

/** The `config` section of a recording of a run of `calls` (its tools, and the tools that compensate them). */
export function configSection(config: RecordingConfig, calls: readonly CallInput[]): Recording['config'] {
  return {
    tools: usedTools(config, calls),
    policy: config.policy,
    limits: scheduled(config.limits),
    defaults: { ...config.defaults },
    ...hooksOf(config),
  };
}

/** The limits that decide a run, for its recording: `hooksInFlight` bounds this process's hook requests, not the run. */
function scheduled(limits: Limits): Limits {
  if (limits.hooksInFlight === undefined) return limits;
  const { hooksInFlight: _, ...rest } = limits;
  return rest;
}
