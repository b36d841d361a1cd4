// Properties of the scheduler over random batches (DESIGN §3, §4, §6), checked on the simulated trace:
// random tools with random reads/writes over a small key space (prefixes and wildcards included),
// random data references to earlier calls, random limits, durations, failures, retries, reviews,
// failure modes and cancels, across several runs and tenants.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TERMINAL_CALL_STATUSES, type CallInput, type CallStatus } from '../../src/core/calls.js';
import type { CoreEvent, EventOf } from '../../src/core/events.js';
import { buildPlan } from '../../src/core/plan.js';
import { SchedulerError } from '../../src/core/scheduler.js';
import { accessOf, anyOverlap, overlaps, parseKey, type Access } from '../../src/core/resources.js';
import type { FailureMode, Limits, Scope, ToolManifest } from '../../src/core/tool.js';
import { catalogOf, concurrency, illegalMoves, rig, statusAfter, tool } from '../helpers/sched.js';

/** Runs per property; raise it to hunt (SCHED_PROP_RUNS=5000 npx vitest run tests/unit/scheduler-properties). */
const RUNS = Number(process.env.SCHED_PROP_RUNS ?? 150);
const TIMEOUT = Math.max(30_000, RUNS * 60);

// ---- scenarios -----------------------------------------------------------------------------------

interface RunSpec {
  runId: string;
  tenant: string;
  at: number;
  failure: FailureMode;
  calls: CallInput[];
}

interface Scenario {
  tools: ToolManifest[];
  runs: RunSpec[];
  limits: Partial<Limits>;
  cancel?: { runId: string; at: number };
  /** Batches handed to `replan()` 5 ms after each run.completed with needs_replan, in turn. */
  replans?: CallInput[][];
}

const TEMPLATES = ['k:{a}', 'k:{a}:{b}', 'k:x', 'k:*', 'j:{a}', 'k', 'k:y'];
const VALUES = ['x', 'y', 'y/z', 'w'];

function arbTools(scopes: readonly Scope[], allowRate: boolean, allowAfter = true): fc.Arbitrary<ToolManifest[]> {
  const one = fc.record({
    effects: fc.oneof(
      { weight: 1, arbitrary: fc.constant(undefined) },
      {
        weight: 6,
        arbitrary: fc.record({ reads: fc.subarray(TEMPLATES, { maxLength: 2 }), writes: fc.subarray(TEMPLATES, { maxLength: 2 }) }),
      },
    ),
    scope: fc.constantFrom(...scopes),
    idempotent: fc.boolean(),
    retry: fc.option(
      fc.record({ attempts: fc.integer({ min: 1, max: 3 }), backoffMs: fc.integer({ min: 1, max: 40 }), maxBackoffMs: fc.constant(60) }),
      { freq: 2 },
    ),
    failFast: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
    dangerous: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
    compensate: fc.integer({ min: 0, max: 2 }).map((n) => n === 0),
    after: allowAfter ? fc.option(fc.integer({ min: 0, max: 4 }), { freq: 4, nil: undefined }) : fc.constant(undefined),
    rate: allowRate
      ? fc.option(fc.record({ tokens: fc.integer({ min: 1, max: 3 }), perMs: fc.constantFrom(10, 25, 100) }), { freq: 4, nil: undefined })
      : fc.constant(undefined),
  });
  return fc.array(one, { minLength: 2, maxLength: 5 }).map((specs) =>
    specs.map((s, i) =>
      tool(`t${i}`, {
        ...(s.effects ?? {}),
        scope: s.scope,
        risk: s.dangerous ? 'dangerous' : 'write',
        idempotent: s.idempotent,
        ...(s.retry && s.idempotent ? { retry: s.retry } : {}),
        ...(s.failFast ? { failure: 'fail_fast' as const } : {}),
        ...(s.rate ? { rate: s.rate } : {}),
        ...(s.compensate ? { compensate: { tool: 't0', args: { a: 'undo ${self.args.a}', ms: 2 } } } : {}),
        after: s.after !== undefined && s.after !== i && s.after < specs.length ? [`t${s.after}`] : [],
      }),
    ),
  );
}

/** A value for a placeholder arg, or (after the first call) a reference to an earlier call's output. */
const arbArg = (earlier: readonly string[]) =>
  earlier.length === 0
    ? fc.constantFrom(...VALUES)
    : fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom(...VALUES) },
        { weight: 1, arbitrary: fc.constantFrom(...earlier).map((id) => `\${${id}.output.v}`) },
      );

/**
 * Calls `${prefix}0…`; each may refer to the calls before it and to `outside` (earlier calls of the
 * run, for a replan: some of them may not exist, which must fail the call at plan time).
 */
function arbCalls(nTools: number, prefix = 'c', outside: readonly string[] = []): fc.Arbitrary<CallInput[]> {
  return fc.integer({ min: 1, max: prefix === 'c' ? 9 : 4 }).chain((n) =>
    fc
      .tuple(
        ...Array.from({ length: n }, (_, i) => {
          const earlier = [...outside, ...Array.from({ length: i }, (_, j) => `${prefix}${j}`)];
          return fc.record({
            tool: fc.integer({ min: 0, max: nTools - 1 }),
            a: arbArg(earlier),
            b: fc.constantFrom('p', 'q'),
            ms: fc.integer({ min: 0, max: 20 }),
            fail: fc.oneof(
              { weight: 6, arbitrary: fc.constant(0) },
              { weight: 1, arbitrary: fc.constant(1) },
              { weight: 1, arbitrary: fc.constant(2) },
              { weight: 1, arbitrary: fc.constant('always') },
            ),
            retryable: fc.boolean(),
            dep: earlier.length === 0 ? fc.constant(undefined) : fc.option(fc.constantFrom(...earlier), { freq: 3, nil: undefined }),
            v: fc.constantFrom(...VALUES),
          });
        }),
      )
      .map((specs) =>
        specs.map((s, i) => ({
          id: `${prefix}${i}`,
          tool: `t${s.tool}`,
          args: {
            a: s.a,
            b: s.b,
            ms: s.ms,
            fail: s.fail,
            retryable: s.retryable,
            out: { id: `${prefix}${i}`, v: s.v },
            ...(s.dep !== undefined ? { dep: `\${${s.dep}.output.id}` } : {}),
          },
        })),
      ),
  );
}

interface ScenarioOptions {
  scopes: readonly Scope[];
  rate: boolean;
  cancel: boolean;
  modes: readonly FailureMode[];
  /** How many replan batches to generate (handed to the runs that end needs_replan). */
  replans?: number;
  /** Tools with `after` (policy edges); default true. */
  after?: boolean;
}

function arbScenario(opts: ScenarioOptions): fc.Arbitrary<Scenario> {
  return arbTools(opts.scopes, opts.rate, opts.after ?? true).chain((tools) =>
    fc
      .record({
        runs: fc.array(
          fc.record({
            tenant: fc.constantFrom('A', 'B'),
            at: fc.integer({ min: 0, max: 30 }),
            failure: fc.constantFrom(...opts.modes),
            calls: arbCalls(tools.length),
          }),
          { minLength: 1, maxLength: 3 },
        ),
        global: fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined }),
        perRun: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
        tenantA: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
        toolLimits: fc.array(fc.option(fc.integer({ min: 1, max: 2 }), { nil: undefined }), {
          minLength: tools.length,
          maxLength: tools.length,
        }),
        resource: fc.option(fc.record({ key: fc.constantFrom('k:x', 'k:y', 'k', 'j:*'), limit: fc.integer({ min: 1, max: 2 }) }), {
          nil: undefined,
        }),
        cancel: opts.cancel
          ? fc.option(fc.record({ run: fc.nat(), at: fc.integer({ min: 0, max: 60 }) }), { freq: 3, nil: undefined })
          : fc.constant(undefined),
        replans: fc.tuple(
          ...Array.from({ length: opts.replans ?? 0 }, (_, k) =>
            arbCalls(tools.length, `n${k}_`, [
              ...Array.from({ length: 9 }, (_, j) => `c${j}`),
              ...Array.from({ length: k }, (_, kk) => `n${kk}_0`),
            ]),
          ),
        ),
      })
      .map((g) => {
        const runs = g.runs.map((r, i) => ({ runId: `r${i}`, ...r }));
        const limits: Partial<Limits> = {
          ...(g.global !== undefined ? { global: g.global } : {}),
          ...(g.perRun !== undefined ? { perRun: g.perRun } : {}),
          tenant: g.tenantA !== undefined ? { A: g.tenantA } : {},
          tool: Object.fromEntries(g.toolLimits.flatMap((l, i) => (l === undefined ? [] : [[`t${i}`, l]]))),
          resource: g.resource ? { [g.resource.key]: g.resource.limit } : {},
        };
        const sc: Scenario = { tools, runs, limits, ...(g.replans.length > 0 ? { replans: g.replans } : {}) };
        if (g.cancel) {
          const run = runs[g.cancel.run % runs.length] as RunSpec;
          sc.cancel = { runId: run.runId, at: run.at + g.cancel.at };
        }
        return sc;
      }),
  );
}

/**
 * Runs a scenario on a fresh scheduler. Reviews are decided 3 ms after they are asked (c2 rejected, the
 * rest approved); 5 ms after a run ends needs_replan, the scenario's next replan batch is handed in.
 */
function simulate(sc: Scenario): CoreEvent[] {
  const replans = new Map<string, number>();
  const tooLate = (err: unknown) => {
    // The call was cancelled meanwhile (a cancel, a fail-fast): the decision comes too late.
    if (err instanceof SchedulerError && err.code === 'conflict') return { events: [], starts: [], aborts: [] };
    throw err;
  };
  const r = rig({
    tools: sc.tools,
    limits: sc.limits,
    onEvent: (e, sim) => {
      if (e.type === 'call.awaiting_review') {
        const decision = e.callId === 'c2' ? 'reject' : 'approve';
        sim.at(sim.now + 3, (now) => {
          try {
            return r.scheduler.decideReview(now, { runId: e.runId, callId: e.callId as string, decision });
          } catch (err) {
            return tooLate(err);
          }
        });
      } else if (e.type === 'run.completed' && e.data.status === 'needs_replan') {
        const n = replans.get(e.runId) ?? 0;
        const batch = sc.replans?.[n];
        if (!batch) return;
        replans.set(e.runId, n + 1);
        sim.at(sim.now + 5, (now) => r.scheduler.replan(now, e.runId, batch));
      }
    },
  });
  for (const run of sc.runs) r.submit(run.at, { runId: run.runId, tenant: run.tenant, failure: run.failure, calls: run.calls });
  if (sc.cancel) {
    const { runId, at } = sc.cancel;
    r.sim.at(at, (now) => r.scheduler.cancel(now, runId));
  }
  r.run();
  return r.events;
}

// ---- the checks ----------------------------------------------------------------------------------

const key = (e: { runId: string; callId?: string }) => `${e.runId}/${e.callId}`;

interface CallInfo {
  runId: string;
  tenant: string;
  id: string;
  manifest: ToolManifest;
  /** Plan-time access (from the args as written). */
  planAccess: Access;
}

/** Every violation of the scheduler's invariants found in the trace (empty when there is none). */
function violations(sc: Scenario, events: CoreEvent[]): string[] {
  const bad: string[] = [];
  const catalog = catalogOf(sc.tools);
  const info = new Map<string, CallInfo>();
  // Plan-level facts per run: data/policy predecessors and conflicting pairs in plan order. A run's
  // calls come in batches (its submission, then each replan); the scheduler plans all of them at once
  // on each replan, and a later batch only starts after the earlier ones have all ended.
  const preds = new Map<string, string[]>();
  const conflictBefore = new Map<string, string[]>();
  const add = (m: Map<string, string[]>, k: string, v: string) => m.set(k, [...(m.get(k) ?? []), v]);
  const conflicts = (p: Access, q: Access) =>
    anyOverlap(p.writes, q.writes) || anyOverlap(p.writes, q.reads) || anyOverlap(p.reads, q.writes);
  for (const run of sc.runs) {
    const batches: CallInput[][] = events
      .filter(
        (e): e is EventOf<'run.created'> | EventOf<'run.replanned'> =>
          e.runId === run.runId && (e.type === 'run.created' || e.type === 'run.replanned'),
      )
      .map((e) => e.data.calls);
    // Batch k is planned with everything before it, as the scheduler does on a replan.
    let before: CallInput[] = [];
    const placed: { id: string; access: Access }[] = []; // earlier batches, all ended before batch k runs
    for (const batch of batches) {
      const all = [...before, ...batch];
      const base = before.length;
      const plan = buildPlan({ calls: all, tenant: run.tenant, catalog, policy: { rules: [] } });
      const id = (i: number) => `${run.runId}/${(all[i] as CallInput).id}`;
      const at = new Map(all.map((c, i) => [c.id, i]));
      for (const p of plan.calls.slice(base)) {
        if (p.manifest)
          info.set(id(p.index), { runId: run.runId, tenant: run.tenant, id: p.id, manifest: p.manifest, planAccess: p.access });
      }
      // (A replan's call can gain a policy edge *to* an earlier call, which ended long ago: not an order.)
      for (const e of plan.edges)
        if (e.kind !== 'conflict' && (at.get(e.to) as number) >= base) add(preds, id(at.get(e.to) as number), id(at.get(e.from) as number));
      const pos = new Map(plan.order.map((i, n) => [i, n]));
      const fresh = plan.calls
        .slice(base)
        .filter((c) => pos.has(c.index))
        .sort((a, b) => (pos.get(a.index) as number) - (pos.get(b.index) as number));
      for (let y = 0; y < fresh.length; y++) {
        const py = fresh[y] as (typeof fresh)[number];
        for (const o of placed) if (conflicts(o.access, py.access)) add(conflictBefore, id(py.index), o.id);
        for (let x = 0; x < y; x++) {
          const px = fresh[x] as (typeof fresh)[number];
          if (conflicts(px.access, py.access)) add(conflictBefore, id(py.index), id(px.index));
        }
      }
      for (const c of fresh) placed.push({ id: id(c.index), access: c.access });
      before = all;
    }
  }

  const status = new Map<string, CallStatus>();
  const running = new Map<string, { info: CallInfo; access: Access }>();
  const succeededAt = new Set<string>();
  const endedSet = new Set<string>();
  const startsOf = new Map<string, number>();
  const completed = new Map<string, number>();
  const replanned = new Map<string, number>();
  const over = new Set<string>();
  /** Runs whose latest run.completed said needs_replan (a cancel may still end them). */
  const needsReplan = new Set<string>();
  const cancelledAfterReplan = new Map<string, number>();
  const retryAt = new Map<string, number>();
  const lim = sc.limits;
  const resources = Object.entries(lim.resource ?? {}).map(([k, n]) => ({ k, segs: parseKey(k), n }));
  const domainOf = (i: CallInfo) => (i.manifest.scope === 'run' ? null : i.manifest.scope === 'global' ? 'global' : `tenant:${i.tenant}`);

  events.forEach((e, n) => {
    const where = `event ${n} (${e.at} ${e.type} ${e.runId}/${e.callId ?? ''})`;
    if (over.has(e.runId)) {
      // After run.completed only a replan may follow (its superseded calls, then run.replanned), or,
      // for a needs_replan run, a cancel: its waiting calls cancelled, then run.completed `cancelled`.
      const reason = e.type === 'call.cancelled' ? e.data.reason.code : undefined;
      const superseded = e.type === 'call.cancelled' && reason === 'superseded';
      const cancelled =
        (e.type === 'call.cancelled' && reason === 'cancelled') || (e.type === 'run.completed' && e.data.status === 'cancelled');
      if (e.type === 'run.replanned') over.delete(e.runId);
      else if (cancelled && needsReplan.has(e.runId)) {
        if (e.type === 'run.completed') cancelledAfterReplan.set(e.runId, (cancelledAfterReplan.get(e.runId) ?? 0) + 1);
      } else if (!superseded) bad.push(`${where}: after run.completed`);
    }
    if (e.type === 'run.replanned') replanned.set(e.runId, (replanned.get(e.runId) ?? 0) + 1);
    if (e.type === 'run.completed') {
      completed.set(e.runId, (completed.get(e.runId) ?? 0) + 1);
      over.add(e.runId);
      if (e.data.status === 'needs_replan') needsReplan.add(e.runId);
      else needsReplan.delete(e.runId);
    }
    if (e.callId === undefined) return;
    const k = key(e);
    const s = statusAfter(e);
    if (s) status.set(k, s);
    if (s && TERMINAL_CALL_STATUSES.has(s)) endedSet.add(k);
    if (s === 'succeeded') succeededAt.add(k);
    if (e.type === 'call.retry_scheduled') {
      if (e.data.at !== e.at + (e.data.delayMs as number)) bad.push(`${where}: retry at ≠ now + delay`);
      retryAt.set(k, e.data.at as number);
    }
    if (running.has(k) && (s === 'pending' || (s && TERMINAL_CALL_STATUSES.has(s)))) running.delete(k);
    if (e.type !== 'call.started') return;

    const me = info.get(k) as CallInfo;
    const access = accessOf(me.manifest, e.data.args);
    const n0 = (startsOf.get(k) ?? 0) + 1;
    startsOf.set(k, n0);
    const maxAttempts = me.manifest.idempotent && me.manifest.retry ? me.manifest.retry.attempts : 1;
    if (n0 > maxAttempts) bad.push(`${where}: attempt ${n0} > ${maxAttempts}`);
    if (e.data.attempt !== n0) bad.push(`${where}: attempt ${String(e.data.attempt)}, expected ${n0}`);
    if (n0 > 1 && e.at < (retryAt.get(k) ?? Infinity)) bad.push(`${where}: retried before its backoff`);
    for (const p of preds.get(k) ?? []) if (!succeededAt.has(p)) bad.push(`${where}: started before its predecessor ${p} succeeded`);
    for (const p of conflictBefore.get(k) ?? [])
      if (!endedSet.has(p)) bad.push(`${where}: started before the earlier conflicting ${p} ended`);
    for (const [ok, o] of running) {
      if (o.info.runId === me.runId) {
        const [p, q] = [o.info.planAccess, me.planAccess];
        if (anyOverlap(p.writes, q.writes) || anyOverlap(p.writes, q.reads) || anyOverlap(p.reads, q.writes))
          bad.push(`${where}: overlaps conflicting ${ok}`);
      } else {
        const d = domainOf(me);
        if (d !== null && d === domainOf(o.info)) {
          if (
            anyOverlap(access.writes, o.access.writes) ||
            anyOverlap(access.writes, o.access.reads) ||
            anyOverlap(access.reads, o.access.writes)
          ) {
            bad.push(`${where}: holds a lock against running ${ok}`);
          }
        }
      }
    }
    running.set(k, { info: me, access });
    const all = [...running.values()];
    const count = (f: (x: { info: CallInfo; access: Access }) => boolean) => all.filter(f).length;
    if (lim.global !== undefined && all.length > lim.global) bad.push(`${where}: global ${all.length} > ${lim.global}`);
    if (lim.perRun !== undefined && count((x) => x.info.runId === me.runId) > lim.perRun) bad.push(`${where}: per-run limit exceeded`);
    const tl = lim.tenant?.[me.tenant] ?? lim.tenant?.default;
    if (tl !== undefined && count((x) => x.info.tenant === me.tenant) > tl) bad.push(`${where}: tenant limit exceeded`);
    const tool = lim.tool?.[me.manifest.name];
    if (tool !== undefined && count((x) => x.info.manifest.name === me.manifest.name) > tool) bad.push(`${where}: tool limit exceeded`);
    for (const r of resources) {
      const touches = (a: Access) => [...a.reads, ...a.writes].some((kk) => overlaps(kk.segs, r.segs));
      if (count((x) => touches(x.access)) > r.n) bad.push(`${where}: resource ${r.k} limit exceeded`);
    }
  });

  for (const run of sc.runs) {
    // Compensations, when a run failed fast: every succeeded call that declares one, newest first
    // (ties: the later call first), each reported once.
    const mine = events.filter((e) => e.runId === run.runId);
    const compensated = mine.filter((e) => e.type === 'call.compensated').map((e) => e.callId as string);
    if (compensated.length > 0) {
      const order = mine
        .filter((e) => e.type === 'run.created' || e.type === 'run.replanned')
        .flatMap((e) => (e.data.calls as CallInput[]).map((c) => c.id));
      const succeeded = mine.filter((e) => e.type === 'call.succeeded' && info.get(key(e))?.manifest.compensate);
      const expectedOrder = succeeded
        .sort((a, b) => b.at - a.at || order.indexOf(b.callId as string) - order.indexOf(a.callId as string))
        .map((e) => e.callId as string);
      if (JSON.stringify(compensated) !== JSON.stringify(expectedOrder))
        bad.push(`${run.runId}: compensated ${compensated.join(',')}, expected ${expectedOrder.join(',')}`);
    }
    const expected = 1 + (replanned.get(run.runId) ?? 0) + (cancelledAfterReplan.get(run.runId) ?? 0);
    if (completed.get(run.runId) !== expected)
      bad.push(`${run.runId}: ${completed.get(run.runId) ?? 0} run.completed events, expected ${expected}`);
  }
  for (const k of info.keys()) {
    const s = status.get(k) ?? 'pending';
    if (!TERMINAL_CALL_STATUSES.has(s)) bad.push(`${k} ends ${s}`);
  }
  bad.push(...illegalMoves(events));
  return bad;
}

/**
 * Work conservation (a limit is also *reached*): at the end of every instant, every ready call is held
 * by a limit that is full. Only for scenarios without locks (scope run) and without rates, where the
 * limits are all that can hold a ready call.
 */
function idleReady(sc: Scenario, events: CoreEvent[]): string[] {
  const bad: string[] = [];
  const catalog = catalogOf(sc.tools);
  const tenantOf = new Map(sc.runs.map((r) => [r.runId, r.tenant]));
  const status = new Map<string, CallStatus>();
  const running = new Map<string, { runId: string; tenant: string; tool: string; segs: string[][] }>();
  const toolOf = new Map<string, string>();
  const argsOf = new Map<string, unknown>();
  for (const r of sc.runs) for (const c of r.calls) toolOf.set(`${r.runId}/${c.id}`, c.tool);
  const lim = sc.limits;
  const resources = Object.entries(lim.resource ?? {}).map(([k, n]) => ({ k, segs: parseKey(k), n }));
  const segsOf = (k: string, args: unknown) => {
    const m = catalog.get(toolOf.get(k) as string) as ToolManifest;
    const a = accessOf(m, args);
    return [...a.reads, ...a.writes].map((x) => x.segs as string[]);
  };
  const checkInstant = (t: number) => {
    const all = [...running.values()];
    for (const [k, s] of status) {
      if (s !== 'ready') continue;
      const runId = k.slice(0, k.indexOf('/'));
      const tenant = tenantOf.get(runId) as string;
      const tool = toolOf.get(k) as string;
      const full = (limit: number | undefined, n: number) => limit !== undefined && n >= limit;
      const held =
        full(lim.global, all.length) ||
        full(lim.perRun, all.filter((x) => x.runId === runId).length) ||
        full(lim.tenant?.[tenant] ?? lim.tenant?.default, all.filter((x) => x.tenant === tenant).length) ||
        full(lim.tool?.[tool], all.filter((x) => x.tool === tool).length) ||
        resources.some((r) => {
          const touches = (segs: string[][]) => segs.some((sg) => overlaps(sg, r.segs));
          return touches(segsOf(k, argsOf.get(k))) && all.filter((x) => touches(x.segs)).length >= r.n;
        });
      if (!held) bad.push(`at ${t}: ${k} is ready and idle though every limit has room`);
    }
  };
  events.forEach((e, n) => {
    if (e.callId !== undefined) {
      const k = key(e);
      const s = statusAfter(e);
      if (e.type === 'call.awaiting_review' || e.type === 'review.decided') argsOf.set(k, e.data.args ?? argsOf.get(k));
      if (s) status.set(k, s);
      if (e.type === 'call.started') {
        argsOf.set(k, e.data.args);
        running.set(k, {
          runId: e.runId,
          tenant: tenantOf.get(e.runId) as string,
          tool: toolOf.get(k) as string,
          segs: segsOf(k, e.data.args),
        });
      } else if (s === 'pending' || (s && TERMINAL_CALL_STATUSES.has(s))) running.delete(k);
    }
    const next = events[n + 1];
    if (!next || next.at > e.at) checkInstant(e.at);
  });
  return bad;
}

// ---- properties ----------------------------------------------------------------------------------

describe('scheduler properties over random batches', () => {
  it(
    'never breaks an ordering, a lock or a limit; every call ends; one run.completed per run; deterministic',
    () => {
      const seen = { 'call.retry_scheduled': 0, 'call.compensated': 0, 'call.awaiting_review': 0, 'call.blocked': 0, parallelRuns: 0 };
      fc.assert(
        fc.property(
          arbScenario({ scopes: ['run', 'tenant', 'global'], rate: true, cancel: true, modes: ['partial', 'fail_fast', 'replan'] }),
          (sc) => {
            const events = simulate(sc);
            for (const t of ['call.retry_scheduled', 'call.compensated', 'call.awaiting_review', 'call.blocked'] as const)
              if (events.some((e) => e.type === t)) seen[t]++;
            if (new Set(events.map((e) => e.runId)).size > 1 && concurrency(events).max > 1) seen.parallelRuns++;
            expect(violations(sc, events)).toEqual([]);
            expect(simulate(sc)).toEqual(events);
          },
        ),
        { numRuns: RUNS },
      );
      // Not vacuous: retries, compensations, reviews, blocks and overlapping runs all happened.
      for (const [what, n] of Object.entries(seen)) expect(n, what).toBeGreaterThan(0);
    },
    TIMEOUT,
  );

  it(
    'replans: appended calls keep every ordering, lock and limit; each needs_replan is followed by a run.completed',
    () => {
      let replanned = 0;
      fc.assert(
        // With `after`: a replanned call may be a policy predecessor of an earlier call.
        fc.property(
          arbScenario({ scopes: ['run', 'tenant', 'global'], rate: true, cancel: false, modes: ['replan'], replans: 2, after: true }),
          (sc) => {
            const events = simulate(sc);
            if (events.some((e) => e.type === 'run.replanned')) replanned++;
            expect(violations(sc, events)).toEqual([]);
            expect(simulate(sc)).toEqual(events);
          },
        ),
        { numRuns: RUNS },
      );
      // Not vacuous: a fair share of the scenarios did replan.
      expect(replanned).toBeGreaterThan(RUNS / 10);
    },
    TIMEOUT,
  );

  it(
    'is work-conserving: a ready call waits only for a full limit (no locks, no rates)',
    () => {
      fc.assert(
        fc.property(arbScenario({ scopes: ['run'], rate: false, cancel: false, modes: ['partial', 'replan'] }), (sc) => {
          const events = simulate(sc);
          expect(idleReady(sc, events)).toEqual([]);
          expect(violations(sc, events)).toEqual([]);
        }),
        { numRuns: RUNS },
      );
    },
    TIMEOUT,
  );

  it('the checkers can fail: a trace with two writers of one file at once is caught', () => {
    const sc: Scenario = {
      tools: [tool('w', { reads: [], writes: ['k:{a}'], scope: 'run' })],
      runs: [
        {
          runId: 'r0',
          tenant: 'A',
          at: 0,
          failure: 'partial',
          calls: [
            { id: 'c0', tool: 'w', args: { a: 'x' } },
            { id: 'c1', tool: 'w', args: { a: 'x' } },
          ],
        },
      ],
      limits: { global: 1 },
    };
    const events = simulate(sc);
    expect(violations(sc, events)).toEqual([]);
    // Swap c1's start before c0's end: both the conflict and the global limit must be reported.
    const i0 = events.findIndex((e) => e.type === 'call.succeeded' && e.callId === 'c0');
    const i1 = events.findIndex((e) => e.type === 'call.started' && e.callId === 'c1');
    const forged = [...events];
    const [moved] = forged.splice(i1, 1);
    forged.splice(i0, 0, moved as CoreEvent);
    const found = violations(sc, forged);
    expect(found.some((v) => v.includes('overlaps conflicting r0/c0'))).toBe(true);
    expect(found.some((v) => v.includes('global 2 > 1'))).toBe(true);
    expect(found.some((v) => v.includes('earlier conflicting r0/c0'))).toBe(true);
    // A ready call left idle with room is reported by the work-conservation check.
    const idle = [...events];
    const iStart = idle.findIndex((e) => e.type === 'call.started' && e.callId === 'c0');
    idle.splice(iStart, 1);
    expect(idleReady(sc, idle).length).toBeGreaterThan(0);
  });
});
