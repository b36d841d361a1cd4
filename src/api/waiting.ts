/**
 * Waits as the API shows them (DESIGN §7): a run's `waitingFor` and `call.waiting` events, and
 * `GET /v1/limits`. An agent sees the holders of its own tenant only, and a count (`otherHolders`) of
 * the rest: no run id of another tenant reaches it.
 */
import type { RunEvent } from '../core/events.js';
import type { LimitInUse } from '../core/scheduler.js';
import { iso, type RunView, type WaitingView } from '../core/view.js';
import type { WaitReason } from '../core/waiting.js';
import type { Principal } from './auth.js';

/** The run as `p` may see it: another tenant's holders left out (the view itself is not changed). */
export function runFor<V extends RunView | undefined>(p: Principal, view: V): V {
  if (p.role === 'operator' || !view || !view.calls.some((c) => c.waitingFor?.some((w) => foreign(p, w)))) return view;
  return {
    ...view,
    calls: view.calls.map((c) => (c.waitingFor?.some((w) => foreign(p, w)) ? { ...c, waitingFor: c.waitingFor.map((w) => own(p, w)) } : c)),
  };
}

/** The event as `p` may see it (a `call.waiting` of another tenant's holders: counted, not named). */
export function eventFor(p: Principal, e: RunEvent): RunEvent {
  if (p.role === 'operator' || e.type !== 'call.waiting' || !e.data.waitingFor.some((w) => foreign(p, w))) return e;
  return { ...e, data: { waitingFor: e.data.waitingFor.map((w) => own(p, w)) } };
}

function foreign(p: Principal, w: WaitReason | WaitingView): boolean {
  return w.holders.some((h) => h.tenant !== p.tenant) || (w.queuedBehind?.some((h) => h.tenant !== p.tenant) ?? false);
}

function own<W extends WaitReason | WaitingView>(p: Principal, w: W): W {
  const holders = w.holders.filter((h) => h.tenant === p.tenant);
  const queued = w.queuedBehind?.filter((h) => h.tenant === p.tenant);
  const hidden = w.holders.length - holders.length + (w.queuedBehind?.length ?? 0) - (queued?.length ?? 0);
  return { ...w, holders, ...(queued ? { queuedBehind: queued } : {}), otherHolders: (w.otherHolders ?? 0) + hidden };
}

/** An item of `GET /v1/limits`: times as ISO text. */
export function limitJson(l: LimitInUse) {
  const { retryAt, until, holders, ...rest } = l;
  return {
    ...rest,
    ...(retryAt !== undefined ? { retryAt: iso(retryAt) } : {}),
    ...(until !== undefined ? { until: iso(until) } : {}),
    holders: holders.map((h) => ({ runId: h.runId, callId: h.callId, tenant: h.tenant, since: iso(h.since) })),
  };
}

/** `GET /v1/limits`: every limit and lock in use, and of flow control (DESIGN §4) the busy keys and the paused tools. */
export interface LimitsBody {
  items: ReturnType<typeof limitJson>[];
  keys: { pattern: string; tool?: string; key: string; limit: number; inUse: number }[];
  paused: { tool: string; key?: string; until: string; status?: number }[];
}

/** The body of `GET /v1/limits` from the limits in use. */
export function limitsBody(items: readonly LimitInUse[]): LimitsBody {
  const keys: LimitsBody['keys'] = [];
  const paused: LimitsBody['paused'] = [];
  for (const l of items) {
    if (l.kind === 'key' && l.pattern !== undefined && l.key !== undefined && l.inUse > 0)
      keys.push({ pattern: l.pattern, ...(l.tool !== undefined ? { tool: l.tool } : {}), key: l.key, limit: l.limit ?? 0, inUse: l.inUse });
    if (l.kind === 'backoff' && l.tool !== undefined && l.until !== undefined) {
      const group = l.key !== undefined && l.key !== l.tool ? l.key.slice(l.tool.length + 1) : undefined;
      paused.push({
        tool: l.tool,
        ...(group !== undefined ? { key: group } : {}),
        until: iso(l.until),
        ...(l.status !== undefined ? { status: l.status } : {}),
      });
    }
  }
  return { items: items.map(limitJson), keys, paused };
}
