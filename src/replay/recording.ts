/**
 * Recordings (DESIGN §8): one self-contained JSON document per run, derived from its event log. It
 * carries the batch, the config that mattered (manifests of the tools used, policy, limits), every
 * attempt with its time and outcome, reviews, replans, and the result. Times are ms from the run's start.
 */
import type { CallInput, RunStatus } from '../core/calls.js';
import type { CallError } from '../core/errors.js';
import type { CoreEvent } from '../core/events.js';
import type { Limits, Policy, ToolManifest } from '../core/tool.js';
import { RunProjection } from '../core/view.js';
import type { Config } from '../config/types.js';

export const RECORDING_FORMAT = 'toolgraph.recording/v1';

export interface RecordedAttempt {
  callId: string;
  attempt: number;
  startMs: number;
  endMs: number;
  ok: boolean;
  output?: unknown;
  error?: CallError;
  /** Whether the failure was retryable (decides whether replay retries it). */
  retryable?: boolean;
  retryAfterMs?: number;
  /** A compensation's attempt rather than the call's own. */
  compensation?: boolean;
}

export interface Recording {
  format: typeof RECORDING_FORMAT;
  run: { id: string; tenant: string; failure: string; tags: Record<string, string> };
  config: { tools: ToolManifest[]; policy: Policy; limits: Limits; defaults?: Record<string, unknown> };
  calls: (CallInput & { atMs?: number })[];
  sealedAtMs?: number;
  /** Mean duration per tool that ranked the ready calls when the run started. */
  estimates?: Record<string, number>;
  replans: { atMs: number; calls: CallInput[] }[];
  reviews: { callId: string; atMs: number; decision: string; args?: Record<string, unknown>; comment?: string }[];
  cancels?: { atMs: number }[];
  attempts: RecordedAttempt[];
  result: { status: RunStatus; calls: { id: string; status: string; output?: unknown; error?: CallError }[] };
}

/** Tools that a run used: its calls' tools, their compensations, and what their policies order after. */
function usedTools(config: Config, calls: readonly CallInput[]): ToolManifest[] {
  const names = new Set(calls.map((c) => c.tool));
  for (const n of [...names]) {
    const m = config.catalog.get(n);
    if (m?.compensate) names.add(m.compensate.tool);
  }
  return config.tools.filter((t) => names.has(t.name)).map(redact);
}

/** Header values can hold secrets; a recording never does. */
function redact(t: ToolManifest): ToolManifest {
  if (t.executor.kind !== 'http' || !t.executor.headers) return t;
  const headers = Object.fromEntries(Object.keys(t.executor.headers).map((k) => [k, '[redacted]']));
  return { ...t, executor: { ...t.executor, headers } };
}

export function recordingOf(events: readonly CoreEvent[], config: Config): Recording {
  const created = events[0] as CoreEvent;
  const t0 = created.at;
  const ms = (at: number) => at - t0;
  const cd = created.data as { tenant: string; failure: string; tags: Record<string, string>; calls: CallInput[]; estimates?: Record<string, number> };
  const allCalls: CallInput[] = [...cd.calls];
  const attempts: RecordedAttempt[] = [];
  const open = new Map<string, RecordedAttempt>();
  const rec: Recording = {
    format: RECORDING_FORMAT,
    run: { id: created.runId, tenant: cd.tenant, failure: cd.failure, tags: cd.tags },
    config: { tools: [], policy: config.policy, limits: config.limits, defaults: { ...config.defaults } },
    calls: cd.calls,
    ...(cd.estimates ? { estimates: cd.estimates } : {}),
    replans: [],
    reviews: [],
    attempts,
    result: { status: 'running', calls: [] },
  };
  const close = (e: CoreEvent, fields: Partial<RecordedAttempt> & { ok: boolean }) => {
    const a = open.get(e.callId as string);
    if (!a) return;
    open.delete(e.callId as string);
    Object.assign(a, { endMs: ms(e.at) }, fields);
  };
  for (const e of events) {
    const d = e.data;
    switch (e.type) {
      case 'call.started': {
        const a: RecordedAttempt = { callId: e.callId as string, attempt: d.attempt as number, startMs: ms(e.at), endMs: ms(e.at), ok: false };
        attempts.push(a);
        open.set(a.callId, a);
        break;
      }
      case 'call.succeeded':
        close(e, { ok: true, output: d.output });
        break;
      case 'call.failed':
        close(e, { ok: false, error: d.error as CallError, ...(d.retryable !== undefined ? { retryable: d.retryable as boolean } : {}) });
        break;
      case 'call.retry_scheduled':
        close(e, { ok: false, error: d.error as CallError, retryable: true, ...(d.retryAfterMs ? { retryAfterMs: d.retryAfterMs as number } : {}) });
        break;
      case 'call.cancelled':
        close(e, { ok: false, error: d.reason as CallError });
        break;
      case 'call.compensated':
        attempts.push({
          callId: e.callId as string,
          attempt: 1,
          startMs: ms((d.startedAt as number | undefined) ?? e.at),
          endMs: ms(e.at),
          ok: d.status === 'succeeded',
          ...(d.output !== undefined ? { output: d.output } : {}),
          ...(d.error !== undefined ? { error: d.error as CallError } : {}),
          compensation: true,
        });
        break;
      case 'review.decided':
        rec.reviews.push({
          callId: e.callId as string,
          atMs: ms(e.at),
          decision: d.decision as string,
          ...(d.args ? { args: d.args as Record<string, unknown> } : {}),
          ...(d.comment !== undefined ? { comment: d.comment as string } : {}),
        });
        break;
      case 'run.replanned':
        rec.replans.push({ atMs: ms(e.at), calls: d.calls as CallInput[] });
        allCalls.push(...(d.calls as CallInput[]));
        break;
      default:
        break;
    }
  }
  rec.config.tools = usedTools(config, allCalls);
  const view = RunProjection.of(events).view;
  rec.result = {
    status: view.status,
    calls: view.calls.map((c) => ({
      id: c.id,
      status: c.status,
      ...(c.status === 'succeeded' ? { output: c.output } : {}),
      ...(c.error ?? c.blockedBy ? { error: (c.error ?? c.blockedBy) as CallError } : {}),
    })),
  };
  return rec;
}
