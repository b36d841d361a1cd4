/**
 * The rows of a permit ask as the decision reads them, and back (cluster/permits.ts): rate buckets kept
 * by a core limiter, pauses, lock waiters' and counter waiters' marks parsed from and written as JSON,
 * and holders as `waitingFor` names them. Pure.
 */
import { Limiter, type Holder, type Pause } from '../core/limits.js';
import { key } from '../core/resources.js';
import type { Limits } from '../core/tool.js';
import type { WaitHolder } from '../core/waiting.js';
import type * as sql from '../store/postgres/permits.js';
import type { Claim, Rates } from './permit-plan.js';
import type { CounterMark } from './permit-priority.js';
import type { Mark, NodeMarks } from './permit-waits.js';
import { refusalOf } from './refusals.js';

/**
 * The rate buckets an ask locked, kept by a core `Limiter` of the rate limits only (its holders are
 * copies without a lock domain: it checks rates and nothing else).
 */
export class ClusterRates implements Rates {
  private readonly limiter: Limiter;
  private readonly copies = new Map<Holder, Holder>();

  constructor(
    limits: Limits,
    seeds: readonly sql.BucketRow[],
    private readonly now: number,
  ) {
    this.limiter = new Limiter({ tenant: {}, tool: {}, resource: {}, rate: limits.rate, maxCallsPerRun: Infinity });
    for (const b of seeds) this.limiter.seedBucket(b.name, b.units, b.last);
  }

  check(h: Holder) {
    const copy = this.copyOf(h);
    const check = this.limiter.check(copy, this.now);
    if (check.ok) return check;
    const why = refusalOf(this.limiter, copy, check, new Map());
    return { ok: false as const, ...(check.wakeAt === undefined ? {} : { wakeAt: check.wakeAt }), ...(why ? { why } : {}) };
  }

  take(h: Holder): void {
    this.limiter.acquire(this.copyOf(h), this.now);
  }

  buckets(): sql.BucketRow[] {
    return [...this.limiter.rateBuckets()]
      .filter(([, b]) => Number.isFinite(b.last))
      .map(([name, b]) => ({ name, units: b.units, last: b.last }));
  }

  private copyOf(h: Holder): Holder {
    let c = this.copies.get(h);
    if (!c) {
      c = { runId: h.runId, tenant: h.tenant, tool: h.tool, domain: null, reads: [], writes: [], toolRate: h.toolRate };
      this.copies.set(h, c);
    }
    return c;
  }
}

/**
 * The pause (if any) that holds a claim back: its tool's, or, for a tool with keyed concurrency, its
 * keyed group's (times on the database's clock).
 */
export function pausedIn(rows: readonly sql.PauseRow[]): ((c: Claim) => Pause | undefined) | undefined {
  if (rows.length === 0) return undefined;
  return (c) => {
    const keyed = c.holder.keyed !== undefined && c.holder.perKey !== undefined;
    const row = rows.find((p) => p.tool === c.request.tool && (keyed ? p.key === c.holder.perKey : p.key === ''));
    if (!row) return undefined;
    const out: Pause = { tool: row.tool, until: row.until };
    if (row.key !== '') out.key = row.key;
    if (row.status !== null) out.status = row.status;
    return out;
  };
}

/** The rate buckets that rated calls take a token from (`tool:<t>`, `tenant:<t>`). */
export function bucketNames(rated: readonly Claim[], limits: Limits): string[] {
  const names = new Set<string>();
  for (const c of rated) {
    if (c.holder.toolRate) names.add(`tool:${c.request.tool}`);
    if (Object.hasOwn(limits.rate.tenant, c.request.tenant) || Object.hasOwn(limits.rate.tenant, 'default'))
      names.add(`tenant:${c.request.tenant}`);
  }
  return [...names].sort();
}

export function marksOf(rows: ReadonlyMap<string, sql.MarkRow>): Map<string, NodeMarks> {
  const parse = (text: string | null): Mark | null => {
    if (text === null) return null;
    try {
      return JSON.parse(text) as Mark;
    } catch {
      return null;
    }
  };
  return new Map([...rows].map(([row, m]) => [row, { at: parse(m.at), below: parse(m.below) }]));
}

export function marksText(marks: ReadonlyMap<string, NodeMarks>): Map<string, sql.MarkRow> {
  const text = (m: Mark | null | undefined) => (m ? JSON.stringify(m) : null);
  return new Map([...marks].map(([row, m]) => [row, { at: text(m.at), below: text(m.below) }]));
}

/** The counters' waiters, parsed (a list that does not parse is none). */
export function counterMarksOf(rows: ReadonlyMap<string, string>): Map<string, CounterMark[]> {
  const out = new Map<string, CounterMark[]>();
  for (const [key, text] of rows) {
    try {
      const list = JSON.parse(text) as unknown;
      out.set(key, Array.isArray(list) ? (list as CounterMark[]) : []);
    } catch {
      out.set(key, []);
    }
  }
  return out;
}

/** A refusal that keeps a counter's last place for a more urgent waiter names it (`queuedBehind`; its time on this replica's clock). */
export function behindOf(m: CounterMark | undefined, now: number): { queuedBehind?: WaitHolder[] } {
  if (m === undefined) return {};
  return { queuedBehind: [{ runId: m.run, callId: m.call, tenant: m.tenant, since: Date.now() - Math.max(0, now - m.readyAt) }] };
}

export function copyNodes(nodes: ReadonlyMap<string, sql.NodeRow>): Map<string, sql.NodeRow> {
  return new Map([...nodes].map(([k, v]) => [k, { ...v }]));
}

/** A permit row as a core limiter holds it: its run, tenant, tool and lock keys (parsed from JSON). */
export function lockHolderOfRow(row: Pick<sql.PermitRow, 'run_id' | 'tenant' | 'tool' | 'domain' | 'reads' | 'writes'>): Holder {
  return {
    runId: row.run_id,
    tenant: row.tenant,
    tool: row.tool,
    domain: row.domain,
    reads: (JSON.parse(row.reads) as string[]).map(key),
    writes: (JSON.parse(row.writes) as string[]).map(key),
  };
}

export function holderOfRow(row: sql.PermitRow): WaitHolder {
  return { runId: row.run_id, callId: row.call_id, tenant: row.tenant, since: Number(row.since) };
}
