/**
 * Dispatch under limits (DESIGN §4): a ready call joins its run's ready set; `dispatch` then starts
 * ready calls while every limit that applies has room (limits.ts, `perRun` included), taking them all
 * at once. The order: tenants round robin, then runs by arrival, then longest remaining path, then
 * original index. A loop over the ready sets, as p-queue's `while (this.#tryToStartAnother()) {}`.
 */
import type { KeyedHeap } from '../heap.js';
import { own, type Pause } from '../limits.js';
import { transition } from '../state.js';
import type { WaitReason } from '../waiting.js';
import { refusedFor } from './cluster-waits.js';
import { askHooks } from './hook-requests.js';
import { acquired, heldBack, queued, startWait, waitedOutside } from './outside.js';
import { pauseTool } from './pauses.js';
import { byPriority, emit, markDirty, readySet, type ScheduledCall, type ScheduledRun, type SchedulerState, wakeAt } from './records.js';

/** The data of events that carry none (shared, so frozen). */
const NO_DATA: Record<string, never> = Object.freeze({});

/**
 * Makes a call ready if nothing holds it back any more: armed, reviewed, no conflict to wait for. A
 * call with `before_call` hooks then waits for them (hooking.ts) before it joins the ready set.
 */
export function maybeReady(s: SchedulerState, run: ScheduledRun, c: ScheduledCall): void {
  if (c.status !== 'pending' || !c.armed || c.retrying || c.conflictWaiting > 0) return;
  if (c.review !== undefined && !c.reviewed) return;
  if (run.cancelRequested || run.failFastBy !== undefined) return;
  transition(c, 'ready');
  emit(s, 'call.ready', run, c, NO_DATA);
  if (!c.hooked && askHooks(s, run, c, 'before_call')) {
    markDirty(s, run);
    return;
  }
  enqueueReady(s, run, c);
}

/** A ready call joins its run's ready set, to start when every limit has room. */
export function enqueueReady(s: SchedulerState, run: ScheduledRun, c: ScheduledCall): void {
  let heap = run.ready.get(c.tool);
  if (!heap) {
    heap = readySet();
    run.ready.set(c.tool, heap);
    run.readySets.push([c.tool, heap]);
  }
  heap.push(c);
  if (run.readyCount++ === 0) run.readySince = s.now;
  queued(s, run, c);
  markDirty(s, run);
  // A call ready but not started within its queue timeout fails `queue_timeout` (DESIGN §4, `tick`).
  const queueMs = c.manifest?.queueTimeoutMs ?? s.opts.defaults.queueTimeoutMs;
  if (queueMs !== undefined) s.timers.push({ at: s.now + queueMs, seq: s.timerSeq++, runId: run.id, index: c.index, queued: c.attempts });
  const book = s.waits;
  if (book !== undefined) book.fresh[book.freshCount++] = c;
}

/**
 * Starts ready calls, best first, until no limit has room for any. The order (DESIGN §4): the more
 * urgent run first (its `priority`, less one level per `priorityAgingMs` its calls have waited, at
 * least 1); within a level, tenants by weighted round robin (`limits.weights`: a tenant of weight w
 * gets w turns in a row), then runs by arrival, then longest remaining path, then original index.
 */
export function dispatch(s: SchedulerState): void {
  const limiter = s.limiter;
  if (limiter.globalFull()) return;
  // The levels that runs with ready calls are at now, as a bit mask (bit L for level L). Computed once
  // per step: starting calls only empties levels, and a level with nothing to start is passed.
  const levels = levelsNow(s);
  if (levels === 0) return;
  // One level (the usual case: every run at the default priority): the tenants' round robin alone.
  if ((levels & (levels - 1)) === 0) {
    while (startOne(s, -1)) if (limiter.globalFull()) return;
    return;
  }
  for (;;) {
    let started = false;
    for (let level = 1; level <= 5 && !started; level++) if ((levels & (1 << level)) !== 0) started = startOne(s, level);
    if (!started || limiter.globalFull()) return;
  }
}

/** Starts the best ready call of the runs at `level` (-1: at any level); false when none can start. */
function startOne(s: SchedulerState, level: number): boolean {
  const limiter = s.limiter;
  const n = s.tenants.length;
  for (let k = 0; k < n; k++) {
    const ti = (s.rr + k) % n;
    const tenant = s.tenants[ti] as string;
    if (limiter.globalFull()) return false;
    if (limiter.tenantFull(tenant)) continue;
    for (const run of s.tenantRuns.get(tenant) as ScheduledRun[]) {
      if (run.readyCount === 0) continue;
      if (level !== -1 && levelOf(s, run) !== level) continue;
      if (limiter.runFull(run.id)) continue;
      const c = pick(s, run);
      if (c === 'stop') break;
      if (!c) continue;
      takeReady(run, c);
      start(s, run, c);
      turnTaken(s, tenant, ti);
      return true;
    }
  }
  return false;
}

/**
 * The tenant at `ti` was served: the next turn is the next tenant's, unless this one has turns left
 * (`limits.weights`). Not modulo n: a tenant that arrives later is appended after the one just served,
 * and must be the next in turn (a pointer wrapped to 0 would serve this tenant again first).
 */
function turnTaken(s: SchedulerState, tenant: string, ti: number): void {
  const weight = s.weights === undefined ? 1 : (own(s.weights, tenant) ?? 1);
  if (weight > 1) {
    if (s.rr % Math.max(1, s.tenants.length) === ti) s.rrTurns++;
    else s.rrTurns = 1;
    if (s.rrTurns < weight) {
      s.rr = ti;
      return;
    }
  }
  s.rrTurns = 0;
  s.rr = ti + 1;
}

/** A run's level now: its priority, one more urgent per `agingMs` its calls have waited, at least 1. */
function levelOf(s: SchedulerState, run: ScheduledRun): number {
  if (run.priority === 1) return 1;
  const aged = Math.floor((s.now - run.readySince) / s.agingMs);
  return aged <= 0 ? run.priority : Math.max(1, run.priority - aged);
}

/** The levels of the runs with ready calls, as bits. */
function levelsNow(s: SchedulerState): number {
  let mask = 0;
  const tenants = s.tenants;
  for (let t = 0; t < tenants.length; t++) {
    const runs = s.tenantRuns.get(tenants[t] as string) as ScheduledRun[];
    for (let i = 0; i < runs.length; i++) {
      const run = runs[i] as ScheduledRun;
      if (run.readyCount > 0) mask |= 1 << levelOf(s, run);
    }
  }
  return mask;
}

/** The best ready call of the run that every limit lets start, or 'stop' when its tenant is full. */
/**
 * The call `pick` chose when it had to take calls off the top of its heap to reach it (they wait for a
 * key, a resource, a lock): it is out of its heap already, so `takeReady` does not search the heap for it.
 * Process-wide scratch like waits.ts's: set by `pick` and cleared by the `takeReady` that follows it in
 * the same synchronous call, so two schedulers never see each other's.
 */
let detached: ScheduledCall | undefined;

function pick(s: SchedulerState, run: ScheduledRun): ScheduledCall | undefined | 'stop' {
  let best: ScheduledCall | undefined;
  /** `best`, when it is out of its heap (see `detached`). */
  let bestOut: ScheduledCall | undefined;
  // Indexed, and no destructuring (which goes through the iterator): this runs per dispatch.
  const sets = run.readySets;
  for (let i = 0; i < sets.length; i++) {
    const set = sets[i] as [string, KeyedHeap<ScheduledCall>];
    const tool = set[0];
    const heap = set[1];
    while (heap.size > 0 && (heap.peek() as ScheduledCall).status !== 'ready') {
      heap.pop();
      run.readyCount--;
    }
    if (heap.size === 0 || s.limiter.toolFull(tool)) continue;
    if (best && byPriority(heap.peek() as ScheduledCall, best) > 0) continue;
    let skipped: ScheduledCall[] | undefined;
    let found: ScheduledCall | undefined;
    while (heap.size > 0) {
      const c = heap.peek() as ScheduledCall;
      if (c.status !== 'ready') {
        heap.pop();
        run.readyCount--;
        continue;
      }
      if (s.opts.holds !== undefined && heldBack(s, run, c)) {
        // Replay: the recording shows it waited this long for something outside its run.
        (skipped ??= []).push(heap.pop() as ScheduledCall);
        continue;
      }
      if (c.permitRefusedIn === s.permitEpoch) {
        // The cluster refused it since permits last freed: asking again now would be refused again.
        (skipped ??= []).push(heap.pop() as ScheduledCall);
        continue;
      }
      const check = s.limiter.check(c, s.now);
      if (check.ok) {
        found = c;
        break;
      }
      if (check.reason === 'global' || check.reason === 'tenant') {
        if (skipped) for (const x of skipped) heap.push(x);
        if (bestOut) (run.ready.get(bestOut.tool) as KeyedHeap<ScheduledCall>).push(bestOut);
        return 'stop';
      }
      if (check.reason === 'rate') {
        wakeAt(s, check.wakeAt as number);
        break;
      }
      if (check.reason === 'backoff') {
        wakeAt(s, check.wakeAt as number);
        // The whole tool is paused, or only this call's keyed group (others of the tool may start).
        if (c.keyed === undefined) break;
        (skipped ??= []).push(heap.pop() as ScheduledCall);
        continue;
      }
      if (check.reason === 'tool') break;
      (skipped ??= []).push(heap.pop() as ScheduledCall);
    }
    if (skipped) {
      // `found` is the top now: out before the skipped go back above it (else a search of the heap).
      if (found) heap.pop();
      for (const x of skipped) heap.push(x);
    }
    if (found && (!best || byPriority(found, best) < 0)) {
      if (bestOut) (run.ready.get(bestOut.tool) as KeyedHeap<ScheduledCall>).push(bestOut);
      best = found;
      bestOut = skipped ? found : undefined;
    } else if (found && skipped) heap.push(found);
  }
  detached = bestOut;
  return best;
}

function takeReady(run: ScheduledRun, c: ScheduledCall): void {
  const heap = run.ready.get(c.tool) as KeyedHeap<ScheduledCall>;
  if (c === detached) detached = undefined;
  else if (heap.peek() === c) heap.pop();
  else heap.removeWhere((x) => x === c);
  run.readyCount--;
  // It waits no more: its queue (waits.ts) is shorter by one.
  if (c.waitGroup !== undefined) {
    c.waitGroup.live--;
    c.waitGroup = undefined;
  }
}

function start(s: SchedulerState, run: ScheduledRun, c: ScheduledCall): void {
  const outside = waitedOutside(s, run, c);
  s.limiter.acquire(c, s.now);
  acquired(s, run);
  if (s.opts.gated && s.limiter.shared(c)) {
    // Held here (so local limits count it) while the cluster is asked (DESIGN §12); `permitted` starts it.
    c.permitPending = true;
    c.permitAskedAt = s.now;
    c.askedOutside = outside;
    (s.out.permits ??= []).push({
      runId: run.id,
      callId: c.id,
      tenant: c.tenant,
      tool: c.tool,
      domain: c.domain,
      reads: c.reads.map((k) => k.text),
      writes: c.writes.map((k) => k.text),
      ...(c.perKey !== undefined ? { perKey: c.perKey } : {}),
      ...(run.priority !== 3 ? { priority: run.priority } : {}),
      readyMs: s.now - run.readySince,
    });
    return;
  }
  begin(s, run, c, false, outside);
}

/** Gated: the cluster granted the call's permit; false when it no longer waits for one (ended, cancelled). */
export function permitted(s: SchedulerState, run: ScheduledRun, c: ScheduledCall): boolean {
  if (!c.permitPending || c.status !== 'ready') return false;
  c.permitPending = false;
  // What it waited for is told no more (cluster-waits.ts: a refusal in its next wait is news).
  c.waitReasons = undefined;
  begin(s, run, c, true, c.askedOutside === true, c.permitAskedAt);
  return true;
}

/**
 * Gated: the cluster refused the call's permit: it is ready again, but waits until permits free.
 * `reasons`: what refused it, as the cluster saw it (its `waitingFor` then; cluster-waits.ts).
 */
export function permitRefused(s: SchedulerState, run: ScheduledRun, c: ScheduledCall, reasons?: readonly WaitReason[]): void {
  if (!c.permitPending) return;
  c.permitPending = false;
  s.limiter.release(c);
  if (c.status !== 'ready') return;
  c.permitRefusedIn = s.permitEpoch;
  (run.ready.get(c.tool) as KeyedHeap<ScheduledCall>).push(c);
  // The run waits since it had ready calls (its age is kept: a refusal does not make it young again).
  run.readyCount++;
  if (reasons === undefined) return;
  // Paused on another replica (backpressure): the tool, or this call's keyed group, waits here too.
  for (const r of reasons) {
    if (r.kind !== 'backoff' || r.until === undefined || r.until <= s.now) continue;
    const p: Pause = { tool: c.tool, until: r.until };
    if (c.keyed !== undefined && c.perKey !== undefined) p.key = c.perKey;
    if (r.status !== undefined) p.status = r.status;
    pauseTool(s, p);
  }
  refusedFor(s, run, c, reasons);
}

/**
 * `permit`: it holds a cluster-wide permit, to give back when its attempt ends. `outside`, `asked`:
 * what it waited for outside its run (outside.ts), for its `call.started`.
 */
function begin(s: SchedulerState, run: ScheduledRun, c: ScheduledCall, permit: boolean, outside: boolean, asked?: number): void {
  transition(c, 'running');
  run.running++;
  c.attempts++;
  c.attemptStartedAt = s.now;
  const args = c.resolved as Record<string, unknown>;
  const waited = startWait(c, outside, asked);
  emit(s, 'call.started', run, c, waited === undefined ? { attempt: c.attempts, args } : { attempt: c.attempts, args, waited });
  const m = c.manifest as NonNullable<ScheduledCall['manifest']>;
  // Two literals, not one with `...(permit ? { permit } : {})`: that spread made an empty object and
  // copied it for every start.
  s.out.starts.push(
    permit
      ? { kind: 'call', runId: run.id, callId: c.id, index: c.index, attempt: c.attempts, tool: m, args, timeoutMs: m.timeoutMs, permit }
      : { kind: 'call', runId: run.id, callId: c.id, index: c.index, attempt: c.attempts, tool: m, args, timeoutMs: m.timeoutMs },
  );
}
