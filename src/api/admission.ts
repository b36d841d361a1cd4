/**
 * Admission: what a run may take, checked once, before the engine sees a call, for every route that
 * brings calls — a new run (`POST /v1/runs`, a tool's invoke), calls appended to an open run, and a
 * replan. In order: the run is in a state to take calls (409), the run stays within
 * `limits.maxCallsPerRun` (413), no call id is used in the run already (409), and a new run finds
 * its tenant under `limits.maxActiveRunsPerTenant` (429, with `Retry-After`). Ids unique *within* a
 * request are a rule of the request's shape (contract/batch.ts), checked when it is parsed (400).
 */
import type { Limits } from '../core/tool.js';
import type { RunView } from '../core/view.js';
import type { CallInput } from '../core/calls.js';
import { duplicateIds } from '../contract/batch.js';
import { isEnded } from '../engine/engine.js';
import { ApiError } from './errors.js';

export type Admission =
  | { kind: 'submit'; tenant: string; calls: readonly CallInput[]; activeRuns: () => number }
  | { kind: 'append' | 'replan'; run: RunView; calls: readonly CallInput[] };

/** Throws the `ApiError` that refuses the admission, if one does. */
export function admit(a: Admission, limits: Pick<Limits, 'maxCallsPerRun' | 'maxActiveRunsPerTenant'>): void {
  if (a.kind === 'append') assertOpen(a.run);
  if (a.kind === 'replan' && a.run.status !== 'needs_replan') {
    throw new ApiError('conflict', `run ${a.run.id} is ${a.run.status}; only a needs_replan run takes a replan`);
  }
  const before = a.kind === 'submit' ? 0 : a.run.calls.length;
  const max = limits.maxCallsPerRun;
  if (before + a.calls.length > max) {
    const calls = before + a.calls.length;
    throw new ApiError('payload_too_large', `a run takes at most ${max} calls (limits.maxCallsPerRun), got ${calls}`, { calls, max });
  }
  if (a.kind !== 'submit') {
    const taken = new Set(a.run.calls.map((c) => c.id));
    const [dup] = duplicateIds(a.calls, taken);
    if (dup !== undefined) throw new ApiError('conflict', `call id ${(a.calls[dup] as CallInput).id} is used in run ${a.run.id} already`);
    return;
  }
  const cap = limits.maxActiveRunsPerTenant;
  if (cap !== undefined && a.activeRuns() >= cap) {
    throw new ApiError(
      'too_many_runs',
      `tenant ${a.tenant} has ${cap} active runs (limits.maxActiveRunsPerTenant); retry later`,
      { tenant: a.tenant, active: cap },
      { 'retry-after': '1' },
    );
  }
}

/** A run opened with `open: true`, not sealed, not ended: one that takes appended calls (409 otherwise). */
export function assertOpen(run: RunView): void {
  if (run.stream === undefined) throw new ApiError('conflict', `run ${run.id} was not opened with "open": true`);
  if (run.stream === 'sealed') throw new ApiError('conflict', `run ${run.id} is sealed; it takes no more calls`);
  if (isEnded(run.status)) throw new ApiError('conflict', `run ${run.id} is ${run.status}; it takes no more calls`);
}
