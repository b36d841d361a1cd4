/**
 * The answers of a decided ask (permits.ts): granted, or refused with what refused the call
 * (`waitingFor`): the limit or lock, its key, capacity and use, and the oldest running calls of any
 * replica that hold it. Holders are read here, only for refusals, never on a granted ask's path.
 */
import { Limiter, type Holder } from '../core/limits.js';
import { MAX_HOLDERS, type WaitHolder, type WaitReason } from '../core/waiting.js';
import type { PermitAnswer } from '../engine/engine.js';
import type { PgPool } from '../store/pg-pool.js';
import * as sql from '../store/postgres/permits.js';
import type { PermitRequest } from '../core/scheduler.js';
import type { Claim, Counter, Decided } from './permit-plan.js';
import { behindOf, holderOfRow, lockHolderOfRow } from './permit-rows.js';
import { refusalOf } from './refusals.js';

const GRANTED: PermitAnswer = Object.freeze({ granted: true });
const REFUSED: PermitAnswer = Object.freeze({ granted: false });

/** At most this many lock holders of a domain are read to explain a refusal (the oldest). */
const MAX_LOCK_HOLDERS_READ = 10_000;

/** The answers of a decided ask, with what refused each refused call (read now: holders are read only for refusals). */
export async function answersOf(
  pool: PgPool,
  claims: readonly Claim[],
  decided: Decided,
  now: number,
): Promise<{ answers: PermitAnswer[]; tokenInMs?: number }> {
  const answers: PermitAnswer[] = [];
  let tokenAt: number | undefined;
  const byKey = new Map<string, Promise<WaitHolder[]>>();
  const holdersOf = (k: string) => {
    const p = byKey.get(k) ?? sql.holdersOfKey(pool, k, MAX_HOLDERS).then((rows) => rows.map(holderOfRow));
    byKey.set(k, p);
    return p;
  };
  const locks = await lockReasons(pool, claims, decided, now);
  for (let i = 0; i < claims.length; i++) {
    const d = decided.decisions[i];
    const c = claims[i] as Claim;
    if (d === undefined || d.granted) {
      answers.push(GRANTED);
      continue;
    }
    let why: WaitReason | undefined;
    if (d.reason === 'backoff') {
      const p = d.pause;
      why = {
        kind: 'backoff',
        key: p.key === undefined ? p.tool : `${p.tool} ${p.key}`,
        tool: p.tool,
        // On this replica's clock (the pause's is the database's).
        until: Date.now() + Math.max(0, p.until - now),
        ...(p.status !== undefined ? { status: p.status } : {}),
        holders: [],
      };
      tokenAt = Math.min(tokenAt ?? Infinity, p.until);
    } else if (d.reason === 'tenant' || d.reason === 'tool' || d.reason === 'resource' || d.reason === 'key')
      why = counterReason(d.counter, d.inUse, await holdersOf(d.counter.key), behindOf(d.behind, now));
    else if (d.reason === 'rate') {
      why = d.why;
      if (d.wakeAt !== undefined) tokenAt = Math.min(tokenAt ?? Infinity, d.wakeAt);
    } else {
      why = locks.get(c);
      if (why === undefined && d.reason === 'lock' && d.behind) {
        const b = d.behind;
        const queuedBehind = [{ runId: b.run, callId: b.call, tenant: b.tenant, since: b.since }];
        why = { kind: 'lock', key: b.key, domain: c.request.domain as string, holders: [], queuedBehind };
      }
    }
    answers.push(why ? { granted: false, waitingFor: [why] } : REFUSED);
  }
  return tokenAt === undefined ? { answers } : { answers, tokenInMs: Math.max(0, tokenAt - now) };
}

/** Why a call waits for a full counter: the limit, its use and its oldest holders (and the waiter it is behind, if any). */
function counterReason(counter: Counter, inUse: number, holders: WaitHolder[], behind: { queuedBehind?: WaitHolder[] } = {}): WaitReason {
  const g = counter.kind === 'key' ? counter.group : undefined;
  return {
    kind: counter.kind,
    key: counter.name,
    ...(g ? { pattern: g.pattern } : {}),
    ...(g?.tool !== undefined ? { tool: g.tool } : {}),
    limit: counter.cap,
    inUse,
    holders,
    ...behind,
  };
}

/**
 * Why a call waits for a place of this replica's slice of `counter`, which is the whole limit
 * (replica-slices.ts, `answer`): its holders are the slice's calls, oldest first (`at` and `now` on
 * `performance.now()`, `wall` the same moment on the wall clock).
 */
export function slicedRefusal(
  counter: Counter,
  held: readonly { request: PermitRequest; at: number }[],
  now: number,
  wall: number,
): WaitReason {
  const holders = held.map((h) => ({
    runId: h.request.runId,
    callId: h.request.callId,
    tenant: h.request.tenant,
    since: wall - (now - h.at),
  }));
  return counterReason(counter, counter.cap, holders);
}

/**
 * Why each call refused by a lock waits: the running calls of other runs that hold what it conflicts
 * with (read now, of its domain only), else the earlier waiters of the ask it queues behind, as one
 * replica's limiter says it (core `Limiter`, the ask's refused calls replayed in order).
 */
async function lockReasons(
  pool: PgPool,
  claims: readonly Claim[],
  decided: Decided,
  now: number,
): Promise<Map<Claim, WaitReason | undefined>> {
  const out = new Map<Claim, WaitReason | undefined>();
  const refused = claims.filter((_, i) => {
    const d = decided.decisions[i];
    return d !== undefined && !d.granted && d.reason === 'lock';
  });
  if (refused.length === 0) return out;
  const domains = [...new Set(refused.map((c) => c.request.domain as string))];
  const limiter = new Limiter({ tenant: {}, tool: {}, resource: {}, rate: { tenant: {} }, maxCallsPerRun: Infinity }, false);
  const who = new Map<Holder, WaitHolder>();
  for (const d of domains)
    for (const row of await sql.holdersInDomain(pool, d, MAX_LOCK_HOLDERS_READ)) {
      const h = lockHolderOfRow(row);
      who.set(h, holderOfRow(row));
      limiter.hold(h);
    }
  for (const c of refused) {
    const h: Holder = {
      runId: c.holder.runId,
      tenant: c.holder.tenant,
      tool: c.holder.tool,
      domain: c.holder.domain,
      reads: c.holder.reads,
      writes: c.holder.writes,
    };
    who.set(h, { runId: c.request.runId, callId: c.request.callId, tenant: c.request.tenant, since: now });
    const check = limiter.check(h, now);
    out.set(c, check.ok ? undefined : refusalOf(limiter, h, check, who));
  }
  return out;
}
