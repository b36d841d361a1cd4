/**
 * The scheduler's state: what it keeps of each run and call, the shared state every concern works on
 * (`SchedulerState`), and the small operations they all use (emit an event, mark a run to look at,
 * find a run). No decisions are made here.
 */
import type { CallInput, CallStatus, Diagnostic, RunStatus } from '../calls.js';
import type { CallError } from '../errors.js';
import type { CoreEvent, EventOf, EventPayloads, EventType } from '../events.js';
import type { HookOn } from '../hooks.js';
import { KeyedHeap, MinHeap } from '../heap.js';
import { Limiter, type Bucket, type Holder, type KeyGroup } from '../limits.js';
import type { PlannedCall } from '../plan.js';
import type { Access, Key } from '../resources.js';
import type { StreamPlanner } from '../stream-plan.js';
import type { FailureMode, ToolManifest } from '../tool.js';
import type { WaitHolder, WaitKind, WaitReason } from '../waiting.js';
import { SchedulerError, type AttemptResult, type Output, type SchedulerOptions } from './api.js';

/**
 * A call as its run keeps it. It is its own limit holder (the fields of `Holder`, set when its args
 * are resolved): one object per call instead of two.
 */
export interface ScheduledCall extends Holder {
  index: number;
  id: string;
  tool: string;
  manifest?: ToolManifest;
  args: Record<string, unknown>;
  resolved?: Record<string, unknown>;
  /** Changed only by `transition` (state.ts). */
  status: CallStatus;
  attempts: number;
  output?: unknown;
  error?: CallError;
  review?: string;
  reviewed: boolean;
  /** The plan's `refCalls`: the call each reference in `args` names, in document order. */
  refCalls: number[];
  hasRefs: boolean;
  /** The plan's `templated`: whether `args` hold a `${` at all. */
  templated: boolean;
  dataSucc: number[];
  conflictSucc: number[];
  dataWaiting: number;
  conflictWaiting: number;
  /** Data and policy predecessors not released yet (see `release` in progress.ts). */
  dataUnreleased: number;
  armed: boolean;
  released: boolean;
  retrying: boolean;
  priority: number;
  /** Whether the holder fields are set (the args are resolved). */
  holds: boolean;
  endedAt?: number;
  attemptStartedAt?: number;
  superseded: boolean;
  /** The resources the plan found for the call's own args (reused when it runs with exactly those). */
  planAccess?: Access;
  /** Whether the last failed attempt was retryable (recorded, so replay decides the same way). */
  lastRetryable?: boolean;
  /** The last failed attempt's answer paused its tool (backpressure, DESIGN §4): recorded with its failure. */
  lastPause?: { pauseMs: number; pauseStatus?: number };
  /** In a streamed run: arrived, but a later call may still give it a predecessor. */
  held?: boolean;
  /** Hooks (DESIGN §14, hooking.ts): the event whose hooks the call waits for. */
  hookPending?: HookOn;
  /** When those hooks were asked for (for `after_call`, the attempt's end as the scheduler took it). */
  hookAskedAt?: number;
  /** Its `before_call` hooks have decided (they run once per call, retries and reviews included). */
  hooked: boolean;
  /** The args its `before_call` hooks gave, if they gave any. */
  hookArgs?: Record<string, unknown>;
  /** The last attempt's outcome while its `after_call` hooks decide, and whether a failure propagates. */
  outcome?: { result: AttemptResult; propagate: boolean; durationMs: number };
  /** Gated (DESIGN §12): taken from its ready set and asking for a cluster-wide permit. */
  permitPending?: boolean;
  /** Gated: the `permitEpoch` in which the cluster refused it (it waits for the next one). */
  permitRefusedIn?: number;
  /** Gated: when it asked for its permit, and whether it had waited outside its run before (outside.ts). */
  permitAskedAt?: number;
  askedOutside?: boolean;
  /** When it last joined its run's ready set (outside.ts). */
  queuedAt: number;
  /** Other runs held something when it joined the ready set (outside.ts). */
  crowded: boolean;
  /**
   * Why it waits (waits.ts, with `explainWaits`): what refused it when it was last explained; current
   * while it is `ready`. Kept on the call, not in an object of its own: a big run has tens of
   * thousands of calls waiting at once.
   */
  waitReasons?: WaitReason[] | undefined;
  /** When it began waiting. */
  waitSince?: number;
  /** The queue it waits in (a count limit or a bucket), while it waits in one. */
  waitGroup?: WaitGroup | undefined;
  /** Its explanations so far: tells its place in a queue from an older place it left. */
  waitSeq?: number;
  /** The call as a holder of what others wait for, made once per attempt (waits.ts). */
  heldAs?: WaitHolder | undefined;
}

/** A call that waits for a lock, and the calls it waits for (waits.ts). */
export interface LockWait {
  c: ScheduledCall;
  seq: number;
  /** The holders (or the waiters ahead), and their attempts then. */
  watch: ScheduledCall[];
  attempts: number[];
}

/**
 * The waiters of one count limit or rate bucket (waits.ts). A member is current while its call is
 * ready and its `waitSeq` is the one it had when it joined.
 */
export interface WaitGroup {
  kind: WaitKind;
  key: string | undefined;
  /** A resource limit's index in the limiter. */
  index: number;
  /**
   * The members, the first `size` entries of `members` and `seqs` (never truncated: a queue of tens
   * of thousands that was compacted grew its arrays again, copying them, at every compaction).
   */
  members: (ScheduledCall | undefined)[];
  seqs: number[];
  size: number;
  /** How many members still wait (at least: a call cancelled while it waited is counted until pruned). */
  live: number;
  /** Members are pruned of stale entries when there are this many. */
  compactAt: number;
  /** A rate bucket. */
  bucket: Readonly<Bucket> | undefined;
  /** A keyed limit's group (`kind: 'key'`; `key` is its id). */
  group: KeyGroup | undefined;
  /** A long queue: since when its limit has had room (it is explained again at a later time). */
  staleSince: number | undefined;
  /** The reasons last given to a member: the next one that would get the same shares them. */
  last: WaitReason[] | undefined;
  /** The `call.waiting` payload of `last`, made once. */
  lastData: { waitingFor: WaitReason[] } | undefined;
}

/** What the scheduler keeps to explain waits (`SchedulerOptions.explainWaits`). */
export interface WaitBook {
  /**
   * Calls that became ready in this step: the first `freshCount`. A list and a count, never truncated:
   * truncating an array drops its storage, and the next step's first push allocated it again.
   */
  fresh: ScheduledCall[];
  freshCount: number;
  /** Calls whose attempt ended in this step (what they held, others may now wait for): the first `releasedCount`. */
  released: ScheduledCall[];
  releasedCount: number;
  /** The groups of each kind, by key (`''` for `global`). */
  groups: Map<WaitKind, Map<string, WaitGroup>>;
  /** The same groups, in the order they were made (looked at after every step). */
  list: WaitGroup[];
  /** Calls waiting for a lock. */
  locks: LockWait[];
  /** Gated: calls the cluster refused, waiting for what it said (cluster-waits.ts). */
  refused: { c: ScheduledCall; seq: number }[];
}

export interface ScheduledRun {
  id: string;
  /** 1 (most urgent) to 5 (DESIGN §4); 3 unless the submission said. */
  priority: number;
  /** Since when the run has had ready calls waiting without a pause (its waiting calls' age, for priority aging). */
  readySince: number;
  /** In the scheduler's list of runs that may have ended. */
  dirty: boolean;
  tenant: string;
  /** The lock domain of the run's tenant-scoped calls: `tenant:<tenant>`. */
  tenantDomain: string;
  failure: FailureMode;
  arrival: number;
  calls: ScheduledCall[];
  byId: Map<string, number>;
  inputs: CallInput[];
  ready: Map<string, KeyedHeap<ScheduledCall>>;
  /** `ready`'s entries, in its order: `pick` walks these on every dispatch, and a walk of the map
   *  itself made an entry array per tool each time. */
  readySets: [tool: string, heap: KeyedHeap<ScheduledCall>][];
  readyCount: number;
  running: number;
  /** Set for a streamed run: plans calls as they arrive. */
  stream?: StreamPlanner;
  /** Changed only by `transitionRun` (state.ts). */
  status: RunStatus;
  cancelRequested: boolean;
  /** One run per key (DESIGN §4): the run's `concurrencyKey`. */
  concurrencyKey?: string;
  /** A held run's calls, planned when `release` starts it (it is `queued` until then). */
  heldCalls?: CallInput[];
  /** Why the run was cancelled, when not by a plain cancel: a newer run of its concurrency key (DESIGN §4). */
  cancelReason?: CallError;
  failFastBy?: string;
  compensations?: number[];
  compensating?: number;
  compensationStartedAt?: number;
  cancelledAt?: number;
  replanFailures: ScheduledCall[];
  /** Calls whose failure was handed to a replan: they no longer count against the run's outcome. */
  handed: Set<number>;
  deadlocked: boolean;
  diagnostics: Diagnostic[];
  /** Where the diagnostics of the latest batch of calls start. */
  diagnosticsBase: number;
  /** Found when the run ends (a deadlock at run time): reported with `run.completed`. */
  endDiagnostics: Diagnostic[];
  estimates: Record<string, number>;
}

export interface Timer {
  at: number;
  seq: number;
  runId?: string;
  index?: number;
  /** The open-run timeout of a streamed run. */
  seal?: boolean;
  /** A queue timeout (DESIGN §4): the call's `attempts` when it became ready (a later readiness has its own timer). */
  queued?: number;
}

/** Everything the scheduler knows, shared by its concerns; the `Scheduler` front owns it. */
export interface SchedulerState {
  readonly opts: SchedulerOptions;
  readonly runs: Map<string, ScheduledRun>;
  readonly tenants: string[];
  readonly tenantRuns: Map<string, ScheduledRun[]>;
  /** The tenant whose turn is next (round robin). */
  rr: number;
  /** Weighted round robin: how many turns in a row the tenant at `rr - 1`… has had (see dispatch.ts). */
  rrTurns: number;
  /** `limits.weights` (tenant → turns in a row), or undefined when none is set. */
  readonly weights: Readonly<Record<string, number>> | undefined;
  /** `limits.priorityAgingMs` (default 10000). */
  readonly agingMs: number;
  arrivals: number;
  readonly limiter: Limiter;
  readonly timers: MinHeap<Timer>;
  timerSeq: number;
  /** The times of pending rate wake-ups (one timer each). */
  readonly wakes: Set<number>;
  readonly learned: Map<string, { n: number; mean: number }>;
  out: Output;
  now: number;
  /**
   * Runs that may have ended, in the order they were marked (each once: `ScheduledRun.dirty`). A list
   * and a flag, not a Set: a Set emptied and refilled on every step shrank and grew its table each time.
   */
  readonly dirty: (ScheduledRun | undefined)[];
  /** How many of `dirty` are in use (the list is not truncated: that would drop its storage). */
  dirtyCount: number;
  /** Set with `explainWaits`: why ready calls wait (waits.ts). */
  readonly waits: WaitBook | undefined;
  /** Gated: grows when cluster-wide permits may have freed, so refused calls are asked for again. */
  permitEpoch: number;
  /** The run that last took its limits, and when; and when another run last did before it (outside.ts). */
  readonly lastAcquire: { runId: string | undefined; at: number };
  otherAcquireAt: number;
  /** In a `tick` whose first timer was due before its `now` (it fired late; outside.ts). */
  timerLate: boolean;
  /**
   * Per tool, the latest end of a pause told from outside (`Scheduler.paused`: another replica's
   * backpressure): a call of the tool that was ready while it lasted waited for something outside its
   * run (outside.ts). One entry per tool of the catalog at most.
   */
  readonly outsidePauses: Map<string, number>;
}

/** A run's priority when its submission gives none (DESIGN §4): 1 is the most urgent, 5 the least. */
export const DEFAULT_PRIORITY = 3;

/** A waiting run gains one priority level per this many ms (`limits.priorityAgingMs`). */
export const DEFAULT_PRIORITY_AGING_MS = 10_000;

export function createState(opts: SchedulerOptions): SchedulerState {
  return {
    opts,
    runs: new Map(),
    tenants: [],
    tenantRuns: new Map(),
    rr: 0,
    rrTurns: 0,
    weights: opts.limits.weights !== undefined && Object.keys(opts.limits.weights).length > 0 ? opts.limits.weights : undefined,
    agingMs: opts.limits.priorityAgingMs ?? DEFAULT_PRIORITY_AGING_MS,
    arrivals: 0,
    limiter: new Limiter(opts.limits, !opts.gated || opts.localRates === true),
    timers: new MinHeap<Timer>((a, b) => a.at - b.at || a.seq - b.seq),
    timerSeq: 0,
    wakes: new Set(),
    learned: new Map(),
    out: emptyOutput(),
    now: 0,
    dirty: [],
    dirtyCount: 0,
    waits: opts.explainWaits
      ? { fresh: [], freshCount: 0, released: [], releasedCount: 0, groups: new Map(), list: [], locks: [], refused: [] }
      : undefined,
    permitEpoch: 0,
    lastAcquire: { runId: undefined, at: Number.NEGATIVE_INFINITY },
    otherAcquireAt: Number.NEGATIVE_INFINITY,
    timerLate: false,
    outsidePauses: new Map(),
  };
}

export function emptyOutput(): Output {
  return { events: [], starts: [], aborts: [] };
}

/** Emits an event of the run (of its call `c`, if given) at the scheduler's `now`. */
export function emit<T extends EventType>(
  s: SchedulerState,
  type: T,
  run: ScheduledRun,
  c: ScheduledCall | undefined,
  data: EventPayloads[T],
): void {
  const e: EventOf<T> = c ? { type, runId: run.id, callId: c.id, at: s.now, data } : { type, runId: run.id, at: s.now, data };
  // `EventOf<T>` for one `T` is a member of the union; the compiler cannot see that for a generic T.
  s.out.events.push(e as CoreEvent);
}

export function markDirty(s: SchedulerState, run: ScheduledRun): void {
  if (run.dirty) return;
  run.dirty = true;
  s.dirty[s.dirtyCount++] = run;
}

export function getRun(s: SchedulerState, runId: string): ScheduledRun {
  const run = s.runs.get(runId);
  if (!run) throw new SchedulerError('run_not_found', `no run ${runId}`);
  return run;
}

export function findCall(s: SchedulerState, runId: string, callId: string): { run: ScheduledRun; c: ScheduledCall } {
  const run = getRun(s, runId);
  const idx = run.byId.get(callId);
  if (idx === undefined) throw new SchedulerError('call_not_found', `no call ${callId} in run ${runId}`);
  return { run, c: run.calls[idx] as ScheduledCall };
}

export function newRun(
  s: SchedulerState,
  id: string,
  tenant: string,
  failure: FailureMode,
  estimates: Record<string, number>,
): ScheduledRun {
  const run: ScheduledRun = {
    id,
    priority: DEFAULT_PRIORITY,
    readySince: 0,
    tenant,
    tenantDomain: `tenant:${tenant}`,
    failure,
    arrival: s.arrivals++,
    calls: [],
    byId: new Map(),
    inputs: [],
    ready: new Map(),
    readySets: [],
    readyCount: 0,
    running: 0,
    dirty: false,
    status: 'running',
    cancelRequested: false,
    replanFailures: [],
    handed: new Set(),
    deadlocked: false,
    diagnostics: [],
    diagnosticsBase: 0,
    endDiagnostics: [],
    estimates,
  };
  s.runs.set(run.id, run);
  if (!s.tenantRuns.has(run.tenant)) {
    s.tenants.push(run.tenant);
    s.tenantRuns.set(run.tenant, []);
  }
  (s.tenantRuns.get(run.tenant) as ScheduledRun[]).push(run);
  return run;
}

/** Drops a run from the scheduler (ended and evicted, or half-built by a bug). */
export function forgetRun(s: SchedulerState, run: ScheduledRun): void {
  s.runs.delete(run.id);
  const list = s.tenantRuns.get(run.tenant) as ScheduledRun[];
  list.splice(list.indexOf(run), 1);
  if (run.dirty) {
    run.dirty = false;
    const i = s.dirty.indexOf(run);
    s.dirty.copyWithin(i, i + 1, s.dirtyCount);
    s.dirty[--s.dirtyCount] = undefined;
  }
}

export function newCall(run: ScheduledRun, p: PlannedCall): ScheduledCall {
  // Every field set, in one order: all calls share one shape. Except four that only hooks and failed
  // attempts use (`hookPending`, `hookArgs`, `outcome`, `lastRetryable`): those are added to the calls
  // that need them, and the 100k calls of a big batch without hooks are 32 bytes smaller each (fewer
  // to allocate, and to copy in every scavenge that keeps them). As `permitPending` already was.
  return {
    index: p.index,
    id: p.id,
    tool: p.tool,
    manifest: p.manifest,
    args: p.args,
    resolved: undefined,
    status: 'pending',
    attempts: 0,
    output: undefined,
    error: undefined,
    review: p.review,
    reviewed: false,
    refCalls: p.refCalls,
    hasRefs: p.hasRefs,
    templated: p.templated,
    dataSucc: NO_SUCC,
    conflictSucc: NO_SUCC,
    dataWaiting: 0,
    conflictWaiting: 0,
    dataUnreleased: 0,
    armed: false,
    released: false,
    retrying: false,
    priority: 0,
    holds: false,
    runId: run.id,
    tenant: run.tenant,
    domain: null,
    reads: NO_KEYS,
    writes: NO_KEYS,
    toolRate: undefined,
    resourceLimits: undefined,
    buckets: undefined,
    keyed: undefined,
    perKey: undefined,
    groups: undefined,
    endedAt: undefined,
    attemptStartedAt: undefined,
    superseded: false,
    planAccess: p.access,
    held: false,
    hooked: false,
    waitReasons: undefined,
    waitSince: 0,
    queuedAt: 0,
    crowded: false,
    waitGroup: undefined,
    waitSeq: 0,
    heldAs: undefined,
  };
}

/** The order of ready calls within a run: longest remaining path, then original index. */
export const byPriority = (a: ScheduledCall, b: ScheduledCall) => b.priority - a.priority || a.index - b.index;

/** A tool's ready calls of a run, in `byPriority` order. */
export const readySet = () =>
  new KeyedHeap<ScheduledCall>(
    (c) => -c.priority,
    (c) => c.index,
  );

/** Whether an ended call may be released: everything it waited for, of every kind, is released. */
export function releasable(c: ScheduledCall): boolean {
  return !c.released && c.conflictWaiting === 0 && c.dataUnreleased === 0;
}

/** Not started and not ended: pending, ready or awaiting review. */
export function isPending(c: ScheduledCall): boolean {
  return c.status === 'pending' || c.status === 'ready' || c.status === 'awaiting_review';
}

/** Whether a tool changes anything: it declares writes, or declares nothing at all (unknown effects). */
export function writesSomething(m: ToolManifest): boolean {
  return m.writes === undefined ? m.reads === undefined : m.writes.length > 0;
}

/** The keys of a call whose args are not resolved yet (shared, so frozen). */
const NO_KEYS: Key[] = Object.freeze([]) as unknown as Key[];

/** A successor list that no call has joined yet (shared, so frozen; see `appended`). */
const NO_SUCC: number[] = Object.freeze([]) as unknown as number[];

/**
 * `list` with `index` appended. Most calls have no successors of a kind, or one: they share the empty
 * list, and get a list of one rather than the 16 slots a push onto an empty array reserves.
 */
export function appended(list: number[], index: number): number[] {
  if (list === NO_SUCC) return [index];
  list.push(index);
  return list;
}

/** A call as the run keeps and records it: `args` defaulted, nothing but the fields of a CallInput. */
export function normalized(c: CallInput): CallInput {
  // Already so (what the API and most callers pass): kept as it is, not copied (a 100k-call batch
  // would keep 100k copies alive for the whole run).
  if (c.invalid === undefined && c.args !== undefined && fieldCount(c) === 3) return c;
  const args = c.args ?? {};
  return c.invalid !== undefined ? { id: c.id, tool: c.tool, args, invalid: c.invalid } : { id: c.id, tool: c.tool, args };
}

function fieldCount(o: object): number {
  let n = 0;
  for (const k in o) if (Object.hasOwn(o, k)) n++;
  return n;
}
/** A timer for when a rate limit has a token again, or a pause ends (one per instant). */
export function wakeAt(s: SchedulerState, at: number): void {
  if (s.wakes.has(at)) return;
  s.wakes.add(at);
  s.timers.push({ at, seq: s.timerSeq++ });
}
