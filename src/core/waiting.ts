/**
 * Why a ready call has not started (DESIGN §7, `waitingFor`): the limit or lock that refused it, as
 * the `call.waiting` event carries it. Times are on the scheduler's clock (ms); the run's view shows
 * them as ISO text (view.ts). The scheduler finds these in scheduler/waits.ts.
 */

/** The kinds of wait, in the order the scheduler looks at them (DESIGN §4). */
export const WAIT_KINDS = ['global', 'tenant', 'perRun', 'tool', 'backoff', 'key', 'resource', 'rate', 'lock'] as const;

export type WaitKind = (typeof WAIT_KINDS)[number];

/** A running call that holds what a call waits for. */
export interface WaitHolder {
  runId: string;
  callId: string;
  tenant: string;
  /** When its attempt started. */
  since: number;
}

/**
 * At most this many holders are named, oldest first (`inUse` counts them all): a global limit of 500
 * names 5 of its holders, not 500, in every event of every call behind it.
 */
export const MAX_HOLDERS = 5;

export interface WaitReason {
  kind: WaitKind;
  /**
   * What is limited: the tenant (`tenant`), the run id (`perRun`), the tool (`tool`), the resource
   * limit's key (`resource`), the bucket, `tool:<name>` or `tenant:<t>` (`rate`), the resource key
   * the holder has (`lock`), the expanded key K of a keyed limit (`key`: `repo:acme`, `acme/web`), or
   * what is paused (`backoff`: the tool, or `<tool> <K>` for one keyed group of it). None for `global`.
   */
  key?: string;
  /** `key`: the `limits.each` pattern (`repo:*`), or the tool's `concurrency.per` template. */
  pattern?: string;
  /** `key`: the tool, for a tool's keyed concurrency; `backoff`: the paused tool. */
  tool?: string;
  /** `backoff`: when the pause ends. */
  until?: number;
  /** `backoff`: the HTTP status that asked for it (429, 503), if any. */
  status?: number;
  /** The ceiling: running calls, or tokens per period (`rate`). None for a lock. */
  limit?: number;
  /** Running calls counted against it. */
  inUse?: number;
  /** `rate`: the period of `limit` tokens, in ms. */
  perMs?: number;
  /** `rate`: when its bucket has a token again (as of when the call began waiting for it). */
  retryAt?: number;
  /** `lock`: who shares the lock, `global` or `tenant:<t>` (the tool's `scope`). */
  domain?: string;
  /**
   * The running calls that hold it (up to `MAX_HOLDERS`, oldest first). None for `rate`, and none for
   * `perRun`: those are the run's own running calls (a big run's change at every step).
   */
  holders: WaitHolder[];
  /**
   * `lock` with no holder in conflict: the calls of other runs that asked first and wait for it too
   * (waiters are served first come, first served).
   */
  queuedBehind?: WaitHolder[];
  /** Holders not named to this reader (an agent sees its own tenant's holders only). */
  otherHolders?: number;
}

/** Whether two reasons say the same: kind, key, ceiling, retry time, and the same holders. */
export function sameWait(a: readonly WaitReason[], b: readonly WaitReason[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as WaitReason;
    const y = b[i] as WaitReason;
    if (
      x.kind !== y.kind ||
      x.key !== y.key ||
      x.limit !== y.limit ||
      x.inUse !== y.inUse ||
      x.retryAt !== y.retryAt ||
      x.perMs !== y.perMs ||
      x.domain !== y.domain ||
      x.pattern !== y.pattern ||
      x.tool !== y.tool ||
      x.until !== y.until
    )
      return false;
    if (!sameHolders(x.holders, y.holders) || !sameHolders(x.queuedBehind ?? [], y.queuedBehind ?? [])) return false;
  }
  return true;
}

function sameHolders(a: readonly WaitHolder[], b: readonly WaitHolder[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as WaitHolder;
    const y = b[i] as WaitHolder;
    if (x.runId !== y.runId || x.callId !== y.callId || x.since !== y.since) return false;
  }
  return true;
}
