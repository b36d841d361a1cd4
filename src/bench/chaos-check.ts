/**
 * The invariants of a chaos run (chaos.ts), checked from the tool server's log (what really ran, and
 * when, whichever replica sent it) and the event logs in PostgreSQL. Each is a count of violations,
 * with a few examples; every count must be 0.
 *
 * A replica paused (SIGSTOP) cannot abort the requests it has open: the tool keeps working on them
 * while the lease runs out and another replica takes the run over. Those attempts are counted in the
 * limits only up to the moment of the pause (they are reported apart: `staleOpen`); that the paused
 * replica writes nothing more of them is checked from the event logs (`staleAppends`).
 */
import pg from 'pg';
import { CHAOS_LIMITS, IDEMPOTENT, type ChaosRecord } from './chaos.js';
import { maxOverlap, type Attempt } from './replicas.js';

export interface Violation {
  count: number;
  examples: string[];
}

export interface ChaosReport {
  runsInDb: number;
  accepted: number;
  ended: number;
  statuses: Record<string, number>;
  attempts: number;
  reruns: number;
  takeovers: number;
  leaseLosses: number;
  /** Why, as each replica logged it. */
  lossReasons: Record<string, number>;
  kills: number;
  pauses: number;
  cancelsSent: number;
  /** The most seen at once, per limit (to show the limits were reached, not only respected). */
  reached: Record<string, number>;
  /** Attempts of a paused replica still open at the pause (counted in limits up to the pause only). */
  staleOpen: number;
  violations: Record<string, Violation>;
}

const ACTIVE = new Set(['queued', 'running', 'needs_replan']);
const END_TYPES = new Set(['call.succeeded', 'call.failed']);

function violation(): Violation {
  return { count: 0, examples: [] };
}

function note(v: Violation, example: string): void {
  v.count++;
  if (v.examples.length < 5) v.examples.push(example);
}

/** The overlaps beyond `limit` among `list`: how many attempts started while `limit` others ran. */
function excess(list: readonly { start: number; end: number; what: string }[], limit: number, v: Violation, name: string): number {
  const sorted = [...list].sort((x, y) => x.start - y.start);
  const open: { end: number; what: string }[] = [];
  let max = 0;
  for (const a of sorted) {
    for (let k = open.length - 1; k >= 0; k--) if ((open[k] as { end: number }).end <= a.start) open.splice(k, 1);
    open.push(a);
    max = Math.max(max, open.length);
    if (open.length > limit) note(v, `${name}: ${open.length} at once (limit ${limit}): ${open.map((x) => x.what).join(', ')}`);
  }
  return max;
}

export async function checkChaos(rec: ChaosRecord): Promise<ChaosReport> {
  const v = {
    acceptedLost: violation(),
    notEnded: violation(),
    seqGaps: violation(),
    runEnd: violation(),
    staleAppends: violation(),
    toolLimit: violation(),
    tenantLimit: violation(),
    resourceLimit: violation(),
    resourceLock: violation(),
    globalLock: violation(),
    activeRuns: violation(),
    nonIdempotentTwice: violation(),
    keyChanged: violation(),
    cancelLost: violation(),
    crashes: violation(),
  };
  for (const c of rec.crashes) note(v.crashes, `r${c.replica} exited (code ${c.code}, signal ${c.signal}):\n${c.tail}`);
  // What ran: each attempt's interval, a paused replica's open ones cut at the pause.
  const pauses = rec.faults.filter((f) => f.kind === 'pause');
  let staleOpen = 0;
  const iv = (a: Attempt) => {
    let end = a.end ?? performance.now();
    for (const p of pauses) {
      if (a.replica === `r${p.replica}` && a.start < p.from && end > p.from) {
        end = p.from;
        staleOpen++;
      }
    }
    return { start: a.start, end, what: `${a.runId}/${a.callId}#${a.attempt}@${a.replica ?? '?'}` };
  };
  const attempts = rec.cluster.tools.attempts;
  const of = (pred: (a: Attempt) => boolean) => attempts.filter(pred).map(iv);
  const reached: Record<string, number> = {};
  reached.lim_a = excess(
    of((a) => a.tool === 'lim_a'),
    CHAOS_LIMITS.lim_a,
    v.toolLimit,
    'lim_a',
  );
  reached.capped = excess(
    of((a) => a.args.t === 'capped'),
    CHAOS_LIMITS.capped,
    v.tenantLimit,
    'tenant capped',
  );
  reached['res:*'] = excess(
    of((a) => a.tool === 'res_c'),
    CHAOS_LIMITS.res,
    v.resourceLimit,
    'res:*',
  );
  for (const name of ['n0', 'n1', 'n2'])
    excess(
      of((a) => a.tool === 'res_c' && a.args.name === name),
      1,
      v.resourceLock,
      `writers of res:${name}`,
    );
  reached.lock_w = excess(
    of((a) => a.tool === 'lock_w'),
    1,
    v.globalLock,
    'writers of file:/shared',
  );
  reached.lock_r = maxOverlap(of((a) => a.tool === 'lock_r'));
  // No reader while a writer runs.
  const writers = of((a) => a.tool === 'lock_w');
  for (const r of of((a) => a.tool === 'lock_r')) {
    const w = writers.find((x) => x.start < r.end && r.start < x.end);
    if (w) note(v.globalLock, `reader ${r.what} overlapped writer ${w.what}`);
  }
  // Each call's attempts: a non-idempotent one runs at most once; re-runs keep the Idempotency-Key.
  const byCall = new Map<string, Attempt[]>();
  for (const a of attempts) {
    const k = `${a.runId}/${a.callId}`;
    const list = byCall.get(k);
    if (list) list.push(a);
    else byCall.set(k, [a]);
  }
  let reruns = 0;
  for (const [k, list] of byCall) {
    if (list.length < 2) continue;
    reruns += list.length - 1;
    const tool = (list[0] as Attempt).tool;
    if (!IDEMPOTENT.has(tool))
      note(
        v.nonIdempotentTwice,
        `${k} (${tool}) ran ${list.length} times: attempts ${list.map((a) => `${a.attempt}@${a.replica}`).join(', ')}`,
      );
    const keys = new Set(list.map((a) => a.key));
    if (keys.size !== 1 || keys.has(undefined)) note(v.keyChanged, `${k}: keys ${[...keys].join(', ')}`);
  }

  // The event logs.
  const db = new pg.Client({ connectionString: rec.cluster.db });
  await db.connect();
  const statuses: Record<string, number> = {};
  let runsInDb = 0;
  let ended = 0;
  try {
    const runs = (
      await db.query<{ id: string; tenant: string; status: string; created_at: string; ended_at: string | null; last_seq: number }>(
        'SELECT id, tenant, status, created_at, ended_at, last_seq FROM runs',
      )
    ).rows;
    runsInDb = runs.length;
    const byId = new Map(runs.map((r) => [r.id, r]));
    const acceptedBy = new Map(rec.accepted.map((a) => [a.id, a.replica]));
    for (const a of rec.accepted) if (!byId.has(a.id)) note(v.acceptedLost, `${a.id} (accepted by r${a.replica}) is not in the database`);
    for (const r of runs) {
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      if (ACTIVE.has(r.status) || r.ended_at === null) note(v.notEnded, `${r.id} is ${r.status}`);
      else ended++;
    }
    for (const tenant of new Set(runs.map((r) => r.tenant))) {
      const t0 = Math.min(...runs.map((r) => Number(r.created_at)));
      const list = runs
        .filter((r) => r.tenant === tenant)
        .map((r) => ({
          start: Number(r.created_at),
          end: r.ended_at === null ? Infinity : Number(r.ended_at),
          what: `${r.id} (r${acceptedBy.get(r.id) ?? '?'}, ${Number(r.created_at) - t0}–${Number(r.ended_at) - t0} ms)`,
        }));
      const max = excess(list, CHAOS_LIMITS.maxActiveRunsPerTenant, v.activeRuns, `active runs of tenant ${tenant}`);
      reached[`active runs of ${tenant}`] = max;
    }
    const events = (
      await db.query<{ run_id: string; seq: number; type: string; call_id: string | null; data: string }>(
        'SELECT run_id, seq, type, call_id, data FROM events ORDER BY run_id, seq',
      )
    ).rows;
    const logs = new Map<string, typeof events>();
    for (const e of events) {
      const list = logs.get(e.run_id);
      if (list) list.push(e);
      else logs.set(e.run_id, [e]);
    }
    for (const r of runs) {
      const log = logs.get(r.id) ?? [];
      if (log.some((e, i) => e.seq !== i + 1) || log.length !== r.last_seq)
        note(v.seqGaps, `${r.id}: seqs ${log.map((e) => e.seq).join(',')} (last_seq ${r.last_seq})`);
      const completed = log.filter((e) => e.type === 'run.completed');
      if (!ACTIVE.has(r.status) && (completed.length !== 1 || log[log.length - 1]?.type !== 'run.completed'))
        note(v.runEnd, `${r.id}: ${completed.length} run.completed, last ${log[log.length - 1]?.type}`);
      // A call's attempt ends only while it is the newest: nothing of an attempt after the next one started.
      const newest = new Map<string, number>();
      const endedAttempts = new Set<string>();
      for (const e of log) {
        if (e.call_id === null) continue;
        const data = JSON.parse(e.data) as { attempt?: number };
        if (e.type === 'call.started' && data.attempt !== undefined)
          newest.set(e.call_id, Math.max(newest.get(e.call_id) ?? 0, data.attempt));
        if (END_TYPES.has(e.type) && data.attempt !== undefined) {
          const k = `${e.call_id}#${data.attempt}`;
          if (data.attempt < (newest.get(e.call_id) ?? 0) || endedAttempts.has(k))
            note(v.staleAppends, `${r.id}: ${e.type} of ${k} at seq ${e.seq}, attempt ${newest.get(e.call_id)} had started`);
          endedAttempts.add(k);
        }
      }
    }
    // A cancel answered 202 while the run had not ended must end it cancelled.
    for (const c of rec.cancels) {
      const r = byId.get(c.runId);
      if (c.status === 202 && c.answered !== undefined && ACTIVE.has(c.answered) && r && r.status !== 'cancelled')
        note(v.cancelLost, `${c.runId}: cancel via r${c.via} answered 202 (${c.answered}), the run ended ${r.status}`);
    }
  } finally {
    await db.end();
  }

  let takeovers = 0;
  let leaseLosses = 0;
  const lossReasons: Record<string, number> = {};
  for (const { child } of rec.children) {
    for (const line of child.output().split('\n')) {
      if (line.includes('took over runs whose owner is gone')) takeovers += Number((/"runs":(\d+)/.exec(line) ?? [])[1] ?? 0);
      if (line.includes('lost the lease')) {
        leaseLosses++;
        const reason = (/"reason":"([^"]*)"/.exec(line) ?? [])[1] ?? '?';
        lossReasons[reason] = (lossReasons[reason] ?? 0) + 1;
      }
    }
  }
  return {
    runsInDb,
    accepted: rec.accepted.length,
    ended,
    statuses,
    attempts: attempts.length,
    reruns,
    takeovers,
    leaseLosses,
    lossReasons,
    kills: rec.faults.filter((f) => f.kind === 'kill').length,
    pauses: pauses.length,
    cancelsSent: rec.cancels.length,
    reached,
    staleOpen,
    violations: v,
  };
}
