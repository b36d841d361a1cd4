/**
 * Slices of counted limits (DESIGN §12 "It scales"): quota leasing on top of the counter rows. A
 * replica takes a slice of a counter (a tenant, tool, keyed or resource limit) into its own hands
 * while it asks, and then grants and gives back the calls of that key by itself, with no round trip,
 * as long as nobody else waits for the key. This book is the replica's side of it; it does no I/O
 * (replica-slices.ts writes what it decides, store/postgres/slices.ts holds the SQL).
 *
 * - **Grow.** An ask that locks a counter's row takes up to `chunk` more places into the slice
 *   (`grabs`), when the row has room to spare, no waiter mark of another replica's call more urgent
 *   than the ask's (this replica's own waiters are served from its slices in its own order), and no
 *   refusal in the ask. `chunk` is an eighth of the limit (at least 1): a replica alone reaches the
 *   limit in eight asks, and two share it without one taking it all at once. The calls the ask grants
 *   on such a key take their places into the slice too (replica-slices.ts, `takesInto`), so a replica alone on a limit
 *   ends up holding all of it.
 * - **Grant.** A call whose limits are all counters (no lock, no rate), whose tool is not paused, and
 *   whose every counter has a free place in its slice, is granted here (`tryGrant`); one the slices
 *   cannot take goes to the database.
 * - **Wait here.** Except when this replica's slice of one of its counters is the whole limit, full,
 *   and nobody else waits for the key (`holdsAllOf`): the database holds no place more, so the call
 *   waits here for one of the slice's (a replica alone on a limit it keeps full makes no round trip).
 *   Calls of a key the database refused lately, or of a contended one, ask it at most once per probe
 *   period (`probe`), and at once after a place freed elsewhere (`probeNow`).
 * - **Share.** While other replicas wait for a key (`wanted`, told through `toolgraph_wants` with the
 *   priority of their most urgent waiting call; `contendMs` after the last), this replica keeps an even
 *   share of the limit (`shareOf`: the limit divided among it and them, rounded down), and none while
 *   one of them waits with a more urgent call: then every place freed goes back, and new calls ask the
 *   database, where waiters of every replica are ordered as without slices. Grants and growth stay
 *   within the share.
 * - **Give back.** A call granted here gives its place back to the slice when it ends (`release`). The
 *   slice goes back to the counter (`cuts`): while the key is contended, its free places past the share
 *   at once, and a place freed within it after `handoffMs` unless a call here took it; the whole slice
 *   once it has been unused for `idleMs`.
 * - **Listed.** The calls granted here are listed in `permits` (rows that count nothing), shortly and
 *   off the grant's path (`takeRows`): what `waitingFor` and `GET /v1/limits` show. A call that ended
 *   before its row was written is never written.
 * - **Safety.** The limit holds because a counter's use counts whole slices: the sum of every replica's
 *   slices and unsliced permits never passes the cap (the database checks it when a slice grows). A
 *   replica grants from its slices only while its lease surely holds (the caller checks): once the lease
 *   ended, its slices are freed with its permits by whoever notices (permits-free.ts).
 */
import type { PermitRequest } from '../core/scheduler.js';
import type { SlicedHolder } from '../store/postgres/slices.js';
import { DEFAULT_PRIORITY } from './permit-priority.js';

export interface SliceOptions {
  /** How long a key stays contended after another replica asked for it (ms). */
  contendMs: number;
  /** A slice unused for this long goes back whole (ms). */
  idleMs: number;
  /** How long a place freed in a contended slice, within its share, waits for a call here before it goes back (ms). */
  handoffMs?: number;
}

/** The default `handoffMs`. */
export const HANDOFF_MS = 20;

interface Slice {
  size: number;
  used: number;
  /** When `used` last was or became 0 (for `idleMs`). */
  idleSince: number;
  /** The limit, once a grant or an ask said it (for the share). */
  cap?: number;
  /** When a place of it last freed, and the priority of the call that freed it (for the hand-off). */
  freedAt?: number;
  freedPriority?: number;
}

/** A replica that waits for a key: until when it counts, and the priority of its most urgent call that waits. */
interface Rival {
  until: number;
  priority: number;
}

interface Held {
  keys: readonly string[];
  /** The call's request; its permit row (`NewPermit`) is made only if it is listed. */
  request: PermitRequest;
  at: number;
}

/** At most this many keys' last probes are kept. */
const MAX_PROBED = 10_000;

/** At most this many places are asked for at once per key: an eighth of the limit, at least 1. */
export function chunkOf(cap: number): number {
  return Math.max(1, Math.ceil(cap / 8));
}

const idOf = (runId: string, callId: string) => `${runId}\u0000${callId}`;

export class SliceBook {
  private readonly slices = new Map<string, Slice>();
  private readonly held = new Map<string, Held>();
  /** Key → until when (ms) another replica waits for it. */
  private readonly contended = new Map<string, number>();
  /** Key → when the calls that wait here for it last asked the database (`probe`). */
  private readonly probed = new Map<string, number>();
  /** Key → the replicas that wait for it (by instance). */
  private readonly rivals = new Map<string, Map<string, Rival>>();
  /** Calls granted here whose row is not written yet. */
  private readonly unlisted = new Map<string, Held>();
  /** Calls whose row is written (and not deleted yet). */
  private readonly listed = new Set<string>();
  /** Calls that ended with their row written: the row is to go. */
  private readonly ended = new Map<string, { runId: string; callId: string }>();

  constructor(private readonly opts: SliceOptions) {}

  /**
   * How many places of contended `key` (limit `cap`) this replica may use for a call of `priority`: an
   * even share of the limit between it and the replicas that wait for the key (rounded down: none when
   * they are more than the limit), none at all when any of them waits with a more urgent call, or when
   * none of them said who it is.
   */
  shareOf(key: string, cap: number, now: number, priority = DEFAULT_PRIORITY): number {
    let n = 0;
    const rivals = this.rivals.get(key);
    if (rivals)
      for (const [instance, r] of rivals) {
        if (r.until <= now) {
          rivals.delete(instance);
          continue;
        }
        if (r.priority < priority) return 0;
        n++;
      }
    if (rivals?.size === 0) this.rivals.delete(key);
    return n === 0 ? 0 : Math.floor(cap / (n + 1));
  }

  /** Whether `key`'s slice may not be used for new calls now. */
  isContended(key: string, now: number): boolean {
    const until = this.contended.get(key);
    if (until === undefined) return false;
    if (until > now) return true;
    this.contended.delete(key);
    return false;
  }

  /**
   * Grants `request` from the slices of its counter `keys` (their limits `caps`, in the same order), if
   * each has a free place, and each contended one is used below its share for the request's priority.
   */
  tryGrant(request: PermitRequest, keys: readonly string[], now: number, caps?: readonly number[]): boolean {
    if (keys.length === 0) return false;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i] as string;
      const s = this.slices.get(k);
      if (!s || s.used >= s.size) return false;
      const cap = caps?.[i];
      if (cap !== undefined) s.cap = cap;
      if (this.isContended(k, now) && (s.cap === undefined || s.used >= this.shareOf(k, s.cap, now, request.priority))) return false;
    }
    const id = idOf(request.runId, request.callId);
    if (this.held.has(id)) return false;
    for (const k of keys) (this.slices.get(k) as Slice).used++;
    const h: Held = { keys, request, at: now };
    this.held.set(id, h);
    this.unlisted.set(id, h);
    return true;
  }

  /** Whether this replica holds a slice of `key`. */
  has(key: string): boolean {
    return this.slices.has(key);
  }

  /** Whether this call was granted from the slices (and holds its places now). */
  holds(runId: string, callId: string): boolean {
    return this.held.has(idOf(runId, callId));
  }

  /**
   * Whether this replica's slice of `key` is the whole limit (`cap`), every place of it used, and
   * nobody else waits for the key: the database would refuse a call of it, so the call waits here
   * for a place of the slice, with no round trip (a release here tells the engine to ask again).
   */
  holdsAllOf(key: string, cap: number, now: number): boolean {
    const s = this.slices.get(key);
    return s !== undefined && s.size >= cap && s.used >= s.size && !this.isContended(key, now);
  }

  /**
   * Whether the calls of `key` that wait here (a key the database refused lately, or a contended one)
   * may ask the database now: at most once per `everyMs`, so that it learns of places freed elsewhere
   * without asking for each call.
   */
  probe(key: string, now: number, everyMs: number): boolean {
    if (now - (this.probed.get(key) ?? -Infinity) < everyMs) return false;
    this.probed.set(key, now);
    if (this.probed.size > MAX_PROBED) this.probed.clear();
    return true;
  }

  /** Places freed elsewhere: the next calls of every key may ask the database at once. */
  probeNow(): void {
    this.probed.clear();
  }

  /** The oldest calls granted here that hold a place of `key`'s slice (at most `max`), and when each was granted. */
  holdersOf(key: string, max: number): { request: PermitRequest; at: number }[] {
    const out: { request: PermitRequest; at: number }[] = [];
    for (const h of this.held.values()) {
      if (out.length >= max) break;
      if (h.keys.includes(key)) out.push({ request: h.request, at: h.at });
    }
    return out;
  }

  /**
   * The call ended: its places go back to the slices. `false` when it was not granted here;
   * `'contended'` when a slice it freed a place in is contended (the place is to go back at once).
   */
  release(runId: string, callId: string, now: number): false | 'freed' | 'contended' {
    const id = idOf(runId, callId);
    const h = this.held.get(id);
    if (!h) return false;
    this.held.delete(id);
    let contended = false;
    for (const k of h.keys) {
      const s = this.slices.get(k);
      if (!s) continue;
      s.used = Math.max(0, s.used - 1);
      if (s.used === 0) s.idleSince = now;
      s.freedAt = now;
      s.freedPriority = h.request.priority ?? DEFAULT_PRIORITY;
      if (this.isContended(k, now)) contended = true;
    }
    if (!this.unlisted.delete(id) && this.listed.delete(id)) this.ended.set(id, { runId, callId });
    return contended ? 'contended' : 'freed';
  }

  /**
   * How many places an ask takes into each slice (`grabs`), given each counter's use once the ask's
   * grants are counted (`inUse`), whether its row has a more urgent waiter of another replica
   * (`marked`) or the ask refused a call of it (`refused`: nothing more is taken), and which keys the
   * ask's sliceable calls named; and the keys `open` to the slices (named, not marked, the slice below
   * the limit, or below this replica's share when contended), whose granted calls may take their places
   * into the slices too.
   */
  grabs(
    counters: ReadonlyMap<string, { cap: number; inUse: number; marked: boolean; refused?: boolean; priority?: number }>,
    wanted: ReadonlySet<string>,
    now: number,
  ): { grabs: Map<string, number>; open: Set<string> } {
    const grabs = new Map<string, number>();
    const open = new Set<string>();
    for (const k of wanted) {
      const c = counters.get(k);
      if (!c || c.marked) continue;
      const size = this.slices.get(k)?.size ?? 0;
      // Contended: up to this replica's share (the calls of this ask are as urgent as the others' waiters, or `marked`).
      const most = this.isContended(k, now) ? this.shareOf(k, c.cap, now, c.priority) : c.cap;
      if (size >= most) continue;
      open.add(k);
      // A refusal in the ask (no room, or places kept for more urgent waiters): nothing more is taken.
      const n = c.refused ? 0 : Math.min(chunkOf(c.cap), c.cap - c.inUse, most - size);
      if (n > 0) grabs.set(k, n);
    }
    return { grabs, open };
  }

  /** The places of `grabs` are the slices' now (the ask committed); `caps`: the limits of their keys. */
  grew(grabs: ReadonlyMap<string, number>, now: number, caps?: ReadonlyMap<string, number>): void {
    for (const [k, n] of grabs) {
      const s = this.slices.get(k);
      if (s) s.size += n;
      else this.slices.set(k, { size: n, used: 0, idleSince: now });
      const cap = caps?.get(k);
      if (cap !== undefined) (this.slices.get(k) as Slice).cap = cap;
    }
  }

  /**
   * Another replica (`from`, with the priority of its most urgent call that waits for each key) waits
   * for these keys: they stay contended a while, and their free places past this replica's share go
   * back (see `cuts`).
   */
  wanted(keys: readonly string[], now: number, from?: { instance: string; priority?: ReadonlyMap<string, number> }): boolean {
    let mine = false;
    for (const k of keys) {
      this.contended.set(k, now + this.opts.contendMs);
      if (from) {
        const rivals = this.rivals.get(k) ?? new Map<string, Rival>();
        rivals.set(from.instance, { until: now + this.opts.contendMs, priority: from.priority?.get(k) ?? DEFAULT_PRIORITY });
        this.rivals.set(k, rivals);
      }
      if (this.slices.has(k)) mine = true;
    }
    return mine;
  }

  /**
   * What goes back now, taken off the slices at once (the caller writes it; should that fail, the
   * places stay counted until the lease ends): the free places of contended slices, and slices unused
   * for `idleMs`, whole.
   */
  cuts(now: number): Map<string, { n: number; whole: boolean }> {
    const out = new Map<string, { n: number; whole: boolean }>();
    for (const [k, s] of this.slices) {
      const free = s.size - s.used;
      if (free <= 0) continue;
      const idle = s.used === 0 && now - s.idleSince >= this.opts.idleMs;
      if (!idle && !this.isContended(k, now)) continue;
      const n = idle ? free : free - this.kept(k, s, now);
      if (n <= 0) continue;
      const whole = s.used === 0 && n === free;
      out.set(k, { n, whole });
      if (whole) this.slices.delete(k);
      else s.size -= n;
    }
    return out;
  }

  /**
   * The free places of a contended slice kept for a moment: within its share for the priority of the
   * call that freed the last one, while that was less than `handoffMs` ago (a call that waits here takes
   * it; the engine asks again at once).
   */
  private kept(key: string, s: Slice, now: number): number {
    if (s.cap === undefined || s.freedAt === undefined || now - s.freedAt >= (this.opts.handoffMs ?? HANDOFF_MS)) return 0;
    return Math.max(0, Math.min(s.size - s.used, this.shareOf(key, s.cap, now, s.freedPriority) - s.used));
  }

  /** Whether a contended slice keeps free places for a hand-off now (`cuts` is to run again after `handoffMs`). */
  keeps(now: number): boolean {
    for (const [k, s] of this.slices) if (s.size > s.used && this.isContended(k, now) && this.kept(k, s, now) > 0) return true;
    return false;
  }

  /** Whether `cuts` may have something to give back later (a slice with free places). */
  hasFree(): boolean {
    for (const s of this.slices.values()) if (s.size > s.used) return true;
    return false;
  }

  /**
   * The rows to write now: calls granted here at least `minAgeMs` ago that still run (their `since`
   * older by `ageMs`), and calls whose written row is to go. A call in both (ended, then granted again)
   * keeps its row.
   */
  takeRows(now: number, minAgeMs = 0): { started: SlicedHolder[]; ended: { runId: string; callId: string }[] } {
    const started: SlicedHolder[] = [];
    for (const [id, h] of this.unlisted) {
      if (this.ended.delete(id)) {
        this.listed.add(id);
        this.unlisted.delete(id);
        continue;
      }
      // Granted less than `minAgeMs` ago: listed by a later call, if it still runs then.
      if (now - h.at < minAgeMs) continue;
      started.push({ permit: { ...h.request, keys: h.keys, locks: [] }, ageMs: now - h.at });
      this.listed.add(id);
      this.unlisted.delete(id);
    }
    const ended = [...this.ended.values()];
    this.ended.clear();
    return { started, ended };
  }

  /** Whether `takeRows` has anything to write. */
  hasRows(): boolean {
    return this.unlisted.size > 0 || this.ended.size > 0;
  }

  /** Every slice and call is gone (the lease ended, or all was given back): nothing is granted here any more. */
  clear(): void {
    this.slices.clear();
    this.rivals.clear();
    this.probed.clear();
    this.held.clear();
    this.unlisted.clear();
    this.listed.clear();
    this.ended.clear();
  }

  /** For tests and metrics: each slice's size and use. */
  sizes(): Map<string, { size: number; used: number }> {
    return new Map([...this.slices].map(([k, s]) => [k, { size: s.size, used: s.used }]));
  }
}
