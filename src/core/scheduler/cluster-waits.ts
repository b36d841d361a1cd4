/**
 * Why a call waits when the cluster refused its permit (DESIGN §7 `waitingFor`, §12): its local limits
 * let it start, so waits.ts has nothing to say; the cluster says what refused it (a tenant, tool or
 * resource limit, a rate, or a lock, with holders that may be runs of other replicas). The call is
 * told that reason, with a `call.waiting` event when it changes, as a local wait is.
 *
 * It keeps that reason until it starts, or until the cluster gives another (it asks again whenever
 * permits free). `waitCounts` (limits-in-use.ts) counts it among the waiters of that limit.
 */
import { sameWait, type WaitReason } from '../waiting.js';
import { emit, type ScheduledCall, type ScheduledRun, type SchedulerState } from './records.js';

/** The refused calls' list is pruned of those that moved on when it reaches this many (and doubles). */
const PRUNE_AT = 64;

/** A ready call that the cluster refused for `reasons` (none: it did not say why; nothing changes). */
export function refusedFor(s: SchedulerState, run: ScheduledRun, c: ScheduledCall, reasons: readonly WaitReason[]): void {
  const book = s.waits;
  if (book === undefined || reasons.length === 0 || c.status !== 'ready') return;
  const old = c.waitReasons;
  // Out of any local queue: its place there says something else (waits.ts drops it by `waitSeq`).
  if (c.waitGroup !== undefined) c.waitGroup.live--;
  c.waitGroup = undefined;
  c.waitSeq = (c.waitSeq ?? 0) + 1;
  if (old === undefined) c.waitSince = s.now;
  if (book.refused.length >= Math.max(PRUNE_AT, 2 * (left.get(book.refused) ?? 0))) prune(book.refused);
  book.refused.push({ c, seq: c.waitSeq });
  if (old !== undefined && sameWait(old, reasons)) return;
  c.waitReasons = [...reasons];
  emit(s, 'call.waiting', run, c, { waitingFor: c.waitReasons });
}

/** How many were left after the last prune, by list. */
const left = new WeakMap<object, number>();

function prune(list: { c: ScheduledCall; seq: number }[]): void {
  let n = 0;
  for (const m of list) if (m.c.waitSeq === m.seq && m.c.status === 'ready') list[n++] = m;
  list.length = n;
  left.set(list, n);
}
