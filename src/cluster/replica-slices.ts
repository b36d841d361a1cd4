/**
 * This replica's side of the slices (DESIGN §12 "It scales"): what it grants, refuses and takes into
 * its slices, around the book that counts them (permit-slices.ts). permits.ts asks the database for
 * everything else and calls in here before and after each ask:
 *
 * - before an ask (`answer`): the calls the slices grant now, and those that wait here with no round
 *   trip: for a place of a slice that is the whole limit, and, between two probes of the database
 *   (`PROBE_MS`), for a key it said is full (`full`) or past this replica's share of a contended key;
 * - inside an ask (`grabs`, `takesInto`): the places the ask takes into the slices, and which of the
 *   calls it grants go into them;
 * - after an ask (`took`, `noteFull`, `wantKeys`): the slices grown and the moved calls granted from
 *   them, what the database said is full, and the keys other replicas are told this one waits for
 *   (`toolgraph_wants`), from which they learn to keep to their share (`heardWants`).
 *
 * What the slices give back and list is written off the grants' path, through permits.ts's queue of
 * operations (`soon` asks for it, `write` does it), so it is ordered with the asks and give-backs.
 */
import type { PermitRequest } from '../core/scheduler.js';
import type { Limits } from '../core/tool.js';
import type { Catalog } from '../core/tool.js';
import { MAX_HOLDERS, type WaitReason } from '../core/waiting.js';
import type { PermitAnswer } from '../engine/engine.js';
import type { PgPool } from '../store/pg-pool.js';
import * as slicesSql from '../store/postgres/slices.js';
import { slicedRefusal } from './permit-answers.js';
import { claimOf, type Claim, type Decided } from './permit-plan.js';
import { DEFAULT_PRIORITY } from './permit-priority.js';
import { HANDOFF_MS, SliceBook, type SliceOptions } from './permit-slices.js';

const GRANTED: PermitAnswer = Object.freeze({ granted: true });

/** Calls of a key the database refused lately, or of a contended key, ask it at most this often (ms; one batch per key). */
const PROBE_MS = 25;

/** How soon the calls granted from slices are listed (ms): those that end sooner are never written. */
export const LIST_AFTER_MS = 100;

/** At most this many keys are remembered as full, or as told wanted (past it, they are forgotten). */
const MAX_KEYS_KEPT = 100_000;

export interface ReplicaSlicesOptions {
  pool: PgPool;
  /** This replica's instance now (undefined while it holds no lease). */
  instance: () => string | undefined;
  limits: Limits;
  catalog: Catalog;
  /** Whether this replica's lease surely holds now: nothing is granted from a slice otherwise. */
  holds: () => boolean;
  /** Whether a tool is paused (backpressure, DESIGN §4): its calls are not granted from slices. */
  paused: (tool: string, wallMs: number) => boolean;
  /** How often refused calls ask again (ms): how often this replica tells it still wants a key, at most. */
  retryMs: number;
  /** Queues one `write` in the order of the asks and give-backs. */
  enqueue: () => void;
  book: SliceOptions;
}

/** The answers `answer` gives: `undefined` for a call the database must answer. */
export interface SliceAnswers {
  answers: (PermitAnswer | undefined)[];
  /** The claims of all the calls (an ask of the rest takes them as they are). */
  claims: Claim[];
  granted: number;
  refused: number;
}

export class ReplicaSlices {
  readonly book: SliceBook;
  /** The instance the slices belong to: a new instance starts with none. */
  private sliceOf: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private queued = false;
  /**
   * Keys this replica said it waits for, when, and for which priority (`toolgraph_wants`, at most once
   * per `retryMs / 2` each, unless for a more urgent call).
   */
  private readonly toldWants = new Map<string, { at: number; priority: number }>();
  /**
   * Counter key → why the database refused a call of it, until an ask grants one (what the calls that
   * wait here for a probe are told; a place freed in the cluster lets the next batch probe at once).
   */
  private readonly full = new Map<string, WaitReason>();

  constructor(private readonly o: ReplicaSlicesOptions) {
    this.book = new SliceBook(o.book);
  }

  /**
   * The calls granted from the slices now, and those that wait here (refused with no round trip; see
   * the top of the file). `asking`: for an ask, which probes; `grantNow` only grants, and leaves the
   * probe to the ask that follows it. Undefined when the slices may grant nothing now.
   */
  answer(requests: readonly PermitRequest[], asking: boolean): SliceAnswers | undefined {
    const book = this.book;
    if (!this.o.holds() || !this.here()) return undefined;
    const now = performance.now();
    const wall = Date.now();
    let granted = 0;
    let refused = 0;
    const probing = new Set<string>();
    const claims = requests.map((r) => claimOf(r, this.o.limits, this.o.catalog));
    const answers = claims.map((c): PermitAnswer | undefined => {
      if (!sliceable(c) || this.o.paused(c.request.tool, wall)) return undefined;
      const keys = c.counters.map((k) => k.key);
      if (
        book.tryGrant(
          c.request,
          keys,
          now,
          c.counters.map((k) => k.cap),
        )
      ) {
        granted++;
        return GRANTED;
      }
      const full = c.counters.find((k) => book.holdsAllOf(k.key, k.cap, now));
      if (full !== undefined) {
        refused++;
        return { granted: false, waitingFor: [slicedRefusal(full, book.holdersOf(full.key, MAX_HOLDERS), now, wall)] };
      }
      // Of a key the database refused last (no place freed since that this replica heard of), or past
      // this replica's share of a contended key, the calls of one batch ask the database at most once
      // per PROBE_MS; the others wait here, as the database last said why.
      const capped = c.counters.find((k) => this.full.has(k.key) || book.isContended(k.key, now));
      if (capped === undefined || !asking || probing.has(capped.key)) return undefined;
      if (book.probe(capped.key, now, PROBE_MS)) {
        probing.add(capped.key);
        return undefined;
      }
      refused++;
      const why = this.full.get(capped.key) ?? slicedRefusal(capped, book.holdersOf(capped.key, MAX_HOLDERS), now, wall);
      return { granted: false, waitingFor: [why] };
    });
    if (granted > 0) this.soon(LIST_AFTER_MS);
    return { answers, claims, granted, refused };
  }

  /** Gives a call's place back to its slice; what freed (`contended`: a place others wait for), or false when no slice held it. */
  release(runId: string, callId: string, now: number): false | 'freed' | 'contended' {
    return this.book.release(runId, callId, now);
  }

  /** Another replica waits for keys: this one gives back what it holds of them past its share. */
  heardWants(payload: string): void {
    try {
      const x = JSON.parse(payload) as { instance?: unknown; keys?: unknown; priority?: unknown };
      if (x.instance === this.o.instance() || typeof x.instance !== 'string' || !Array.isArray(x.keys)) return;
      const keys = x.keys.filter((k): k is string => typeof k === 'string');
      const priority = new Map<string, number>();
      if (x.priority && typeof x.priority === 'object')
        for (const [k, v] of Object.entries(x.priority)) if (typeof v === 'number') priority.set(k, v);
      if (this.book.wanted(keys, performance.now(), { instance: x.instance, priority })) this.soon(0);
    } catch {
      // Not ours.
    }
  }

  /** Gives back and lists what the slices say, in `ms` (one write queued at a time). */
  soon(ms: number): void {
    if (ms === 0) {
      if (this.timer) clearTimeout(this.timer);
      this.timer = undefined;
      if (this.queued) return;
      this.queued = true;
      this.o.enqueue();
      return;
    }
    if (this.timer || this.queued) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.soon(0);
    }, ms);
    this.timer.unref();
  }

  /** Writes what the slices give back and list; what failed (the database away) waits for the lease to end it. */
  async write(): Promise<void> {
    this.queued = false;
    const book = this.book;
    const instance = this.o.instance();
    if (instance === undefined || instance !== this.sliceOf) return;
    const now = performance.now();
    const cuts = book.cuts(now);
    const rows = book.takeRows(now, LIST_AFTER_MS);
    try {
      await slicesSql.cutSlices(this.o.pool, instance, cuts);
      await slicesSql.writeHolders(this.o.pool, instance, rows.started, rows.ended);
    } catch {
      // Counted until the lease ends, or given back by the next cut; rows are for views only.
    }
    if (book.keeps(performance.now())) this.soon(HANDOFF_MS);
    else if (book.hasFree() || book.hasRows()) this.soon(book.hasRows() ? LIST_AFTER_MS : this.o.retryMs);
  }

  /**
   * The places an ask takes into the slices (`grabs`): of the counters its sliceable calls name, those
   * `open` to the slices (no live waiter mark of another instance's call more urgent than the ask's,
   * `marked`; below this replica's share when contended) with room to spare and no refusal in this ask
   * (permit-slices.ts).
   */
  grabs(
    claims: readonly Claim[],
    decided: Decided,
    locked: readonly { key: string; cap: number }[],
    counts: ReadonlyMap<string, number>,
    marked: (key: string, priority: number) => boolean,
  ): { grabs: Map<string, number>; open: Set<string> } {
    if (!this.o.holds() || !this.here()) return { grabs: new Map(), open: new Set() };
    /** Key → the most urgent priority of this ask's sliceable calls that name it. */
    const wanted = new Map<string, number>();
    const refused = new Set<string>();
    claims.forEach((c, i) => {
      const d = decided.decisions[i];
      if (d && !d.granted && 'counter' in d) refused.add(d.counter.key);
      if (sliceable(c))
        for (const k of c.counters) wanted.set(k.key, Math.min(wanted.get(k.key) ?? Infinity, c.request.priority ?? DEFAULT_PRIORITY));
    });
    const counters = new Map<string, { cap: number; inUse: number; marked: boolean; refused: boolean; priority: number }>();
    for (const { key: k, cap } of locked) {
      const priority = wanted.get(k) ?? DEFAULT_PRIORITY;
      counters.set(k, {
        cap,
        inUse: (counts.get(k) ?? 0) + (decided.counterDelta.get(k) ?? 0),
        marked: marked(k, priority),
        refused: refused.has(k),
        priority,
      });
    }
    return this.book.grabs(counters, new Set(wanted.keys()), performance.now());
  }

  /**
   * The calls an ask grants that take their places into the slices rather than stay permits of their
   * own: those whose counters are all open to the slices and go into a slice this replica holds, one
   * that grows in this ask, or one of a key the database refused it lately (a call granted on a free key
   * stays a permit of its own, listed at once). So their places stay with this replica when they end,
   * instead of going back to the database one give-back at a time: a replica alone on a limit ends up
   * holding all of it (`SliceBook.holdsAllOf`), and replicas that share a contended limit each their share.
   */
  takesInto(claims: readonly Claim[], decided: Decided, grabs: ReadonlyMap<string, number>, open: ReadonlySet<string>): Set<Claim> {
    const into = (k: string) => open.has(k) && (grabs.has(k) || this.book.has(k) || this.full.has(k));
    return new Set(claims.filter((c, i) => decided.decisions[i]?.granted && sliceable(c) && c.counters.every((k) => into(k.key))));
  }

  /**
   * After an ask of `instance`: its slices grew by `grown` (caps of the locked counters in `caps`), and
   * the moved calls take their places in them now (nothing ran since they grew). Should the slices be
   * another instance's by now, the moved calls are refused (returned): their places go with that
   * instance's lease.
   */
  took(instance: string, grown: ReadonlyMap<string, number>, moved: ReadonlySet<Claim>, caps: ReadonlyMap<string, number>): Set<Claim> {
    const mine = this.sliceOf === instance;
    if (mine && grown.size > 0) this.book.grew(grown, performance.now(), caps);
    const lost = new Set<Claim>();
    for (const c of moved)
      if (
        !mine ||
        !this.book.tryGrant(
          c.request,
          c.counters.map((k) => k.key),
          performance.now(),
        )
      )
        lost.add(c);
    if (moved.size > 0) this.soon(LIST_AFTER_MS);
    return lost;
  }

  /** Which counters the database said are full (a call of it refused), and which not (one granted). */
  noteFull(claims: readonly Claim[], decided: Decided, answers: readonly PermitAnswer[]): void {
    decided.decisions.forEach((d, i) => {
      if (d.granted) for (const k of claims[i]?.counters ?? []) this.full.delete(k.key);
    });
    if (this.full.size > MAX_KEYS_KEPT) this.full.clear();
    decided.decisions.forEach((d, i) => {
      const a = answers[i];
      const why = a && !a.granted ? a.waitingFor?.[0] : undefined;
      if (!d.granted && 'counter' in d && why) this.full.set(d.counter.key, why);
    });
  }

  /**
   * Tells the replicas that hold slices of the counters that refused calls here (with the priority of
   * the most urgent call refused by each): they give back what they hold past their share.
   */
  wantKeys(instance: string, claims: readonly Claim[], decided: Decided): void {
    const now = performance.now();
    const keys = new Map<string, number>();
    decided.decisions.forEach((d, i) => {
      if (d.granted || !('counter' in d)) return;
      const k = d.counter.key;
      const priority = claims[i]?.request.priority ?? DEFAULT_PRIORITY;
      const told = this.toldWants.get(k);
      if (keys.has(k) || told === undefined || now - told.at >= this.o.retryMs / 2 || priority < told.priority)
        keys.set(k, Math.min(keys.get(k) ?? Infinity, priority));
    });
    if (keys.size === 0) return;
    for (const [k, priority] of keys) this.toldWants.set(k, { at: now, priority });
    if (this.toldWants.size > MAX_KEYS_KEPT) this.toldWants.clear();
    slicesSql.tellWants(this.o.pool, instance, keys).catch(() => {
      // The database is away: the refused calls ask again anyway.
    });
  }

  /** Places freed in the cluster: the calls that wait for a key the database said is full probe it now, once. */
  probeNow(): void {
    this.book.probeNow();
  }

  /** Forgets the slices of `instance` (its permits and slices were given back in the database). */
  forget(instance: string): void {
    if (instance === this.sliceOf) this.book.clear();
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Whether the slices belong to this replica's instance now; a new instance starts with none. */
  private here(): boolean {
    const instance = this.o.instance();
    if (instance === undefined) return false;
    if (this.sliceOf !== instance) {
      this.book.clear();
      this.sliceOf = instance;
    }
    return true;
  }
}

/** A call that slices may grant: its limits are all counters (no lock, no rate). */
export function sliceable(c: Claim): boolean {
  return c.counters.length > 0 && c.lockEntries.length === 0 && !c.rated;
}
