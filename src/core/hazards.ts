/**
 * Hazard edges: an index per resource that orders conflicting calls (DESIGN §3).
 *
 * Calls are fed in a fixed order (the data+policy topological order, ties by original index). For each
 * call the index answers which earlier calls it must wait for, then records the call:
 * - a reader waits for the last writer of every overlapping key (read-after-write);
 * - a writer waits for the readers since the last write of every overlapping key, or for that writer
 *   when there were no readers (write-after-read, write-after-write).
 * Edges that a path already implies are left out: a reader already waits for the writer before it, so a
 * later writer waiting for that reader is ordered after both. (The scheduler keeps this sound when a
 * call ends without running: see `conflictReleased` in the scheduler.)
 *
 * The index is a trie over key segments; a write replaces everything below its key, so the work is
 * near-linear in the number of accesses for the usual flat or disjoint keys. A `*` segment in a query
 * visits every sibling; a `*` in the trie is visited by every query.
 */
import type { Access, Key } from './resources.js';
import { Memo } from './memo.js';

export type HazardKind = 'read-after-write' | 'write-after-read' | 'write-after-write';

interface Entry {
  call: number;
  key: string;
}

interface TrieNode {
  children: Map<string, TrieNode>;
  writer: Entry | null;
  readers: Entry[];
  /** The last writer that waited for `readers[0..waitedCount)` (a writer of a key that overlaps this
   *  one), or -1. */
  waitedBy: number;
  waitedCount: number;
}

function node(): TrieNode {
  return { children: new Map(), writer: null, readers: [], waitedBy: -1, waitedCount: 0 };
}

export interface Hazard {
  from: number;
  kind: HazardKind;
  /** The key of the earlier access. */
  key: string;
}

/** No hazards (shared, so frozen): what `add` gives a call that waits for nothing. */
const NO_HAZARDS: Hazard[] = Object.freeze([]) as unknown as Hazard[];

/** Until the first call that touches something: a batch of pure calls allocates no array. */
const EMPTY_FOUND = new Int32Array(0);

export class HazardIndex {
  private readonly root = node();
  /** Per earlier call, the number of the `add` that found it (so each is reported once per add). */
  private foundIn = EMPTY_FOUND;
  private adds = 0;
  /** The call being added. */
  private call = -1;
  /**
   * What the last `scan` found the call to wait for, the first `count` entries of three lists (the
   * earlier call, the kind, the key), reused: a batch's plan made an array per call and an object
   * per hazard, all kept alive until the plan was done.
   */
  private readonly froms: number[] = [];
  private readonly kinds: HazardKind[] = [];
  private readonly keys: string[] = [];
  private count = 0;
  /**
   * Scratch lists of trie nodes for `visit` and `subsumed`, reused across calls, with the number in use
   * kept apart: truncating an array (`length = 0`) drops its storage, and filling it again allocated
   * anew on every level of every access (the largest allocation of a plan).
   */
  private levelA: TrieNode[] = [];
  private levelB: TrieNode[] = [];

  /** The hazards of `call` against every earlier call, then records its accesses. */
  add(call: number, access: Access): Hazard[] {
    const n = this.scan(call, access);
    if (n === 0) return NO_HAZARDS;
    const out: Hazard[] = [];
    for (let j = 0; j < n; j++) out.push({ from: this.from(j), kind: this.kind(j), key: this.key(j) });
    return out;
  }

  /**
   * As `add`, without making the list: returns how many hazards there are, read with `from(j)`,
   * `kind(j)` and `key(j)` (by the earlier call, ascending) until the next `scan` or `add`.
   */
  scan(call: number, access: Access): number {
    this.count = 0;
    if (access.reads.length === 0 && access.writes.length === 0) return 0;
    if (call >= this.foundIn.length) {
      const grown = new Int32Array(Math.max(call + 1, this.foundIn.length * 2, 16));
      grown.set(this.foundIn);
      this.foundIn = grown;
    }
    this.adds++;
    this.call = call;
    // Indexed loops: the key lists may be the shared frozen empty list, which for…of iterates through
    // the generic (allocating) iterator path, several times slower.
    const { reads, writes } = access;
    for (let k = 0; k < reads.length; k++) this.visit((reads[k] as Key).segs, false);
    for (let k = 0; k < writes.length; k++) this.visit((writes[k] as Key).segs, true);
    for (let k = 0; k < reads.length; k++) this.insertRead(call, reads[k] as Key);
    for (let k = 0; k < writes.length; k++) this.insertWrite(call, writes[k] as Key);
    if (this.count > 1) this.sortByFrom();
    return this.count;
  }

  /** The earlier call of the `j`-th hazard of the last `scan`. */
  from(j: number): number {
    return this.froms[j] as number;
  }

  kind(j: number): HazardKind {
    return this.kinds[j] as HazardKind;
  }

  /** The key of the earlier access of the `j`-th hazard. */
  key(j: number): string {
    return this.keys[j] as string;
  }

  /** Notes that the call being added waits for `e` (the first reason found for each earlier call wins). */
  private note(e: Entry | null, kind: HazardKind): void {
    if (!e || e.call === this.call || this.foundIn[e.call] === this.adds) return;
    this.foundIn[e.call] = this.adds;
    const j = this.count++;
    this.froms[j] = e.call;
    this.kinds[j] = kind;
    this.keys[j] = e.key;
  }

  /** Whether the call being added was found to wait for `call`. */
  private waitsFor(call: number): boolean {
    return call !== this.call && this.foundIn[call] === this.adds;
  }

  /**
   * A node whose key overlaps an access of the call being added: a reader waits for its writer; a
   * writer waits for its readers (and is then the one that waited for them), or else for its writer.
   */
  private meet(n: TrieNode, write: boolean): void {
    if (!write) this.note(n.writer, 'read-after-write');
    else if (n.readers.length > 0) {
      for (const r of n.readers) this.note(r, 'write-after-read');
      n.waitedBy = this.call;
      n.waitedCount = n.readers.length;
    } else this.note(n.writer, 'write-after-write');
  }

  /**
   * Meets (see `meet`) every trie node whose key is a shorter overlapping key of `segs` (the root, the
   * empty key, included: it overlaps everything), level by level, then every node at `segs`' depth
   * that overlaps it and every node below those (depth first, last found first).
   */
  private visit(segs: readonly string[], write: boolean): void {
    let level = this.levelA;
    let next = this.levelB;
    level[0] = this.root;
    let size = 1;
    for (let depth = 0; depth < segs.length; depth++) {
      const seg = segs[depth] as string;
      let count = 0;
      for (let j = 0; j < size; j++) {
        const n = level[j] as TrieNode;
        this.meet(n, write);
        if (n.children.size === 0) continue;
        if (seg === '*') for (const c of n.children.values()) next[count++] = c;
        else {
          const exact = n.children.get(seg);
          if (exact) next[count++] = exact;
          const star = n.children.get('*');
          if (star) next[count++] = star;
        }
      }
      const done = level;
      level = next;
      next = done;
      size = count;
      if (size === 0) return;
    }
    const stack = level;
    let top = size;
    while (top > 0) {
      const n = stack[--top] as TrieNode;
      this.meet(n, write);
      if (n.children.size > 0) for (const c of n.children.values()) stack[top++] = c;
    }
  }

  private path(segs: readonly string[]): TrieNode {
    let n = this.root;
    for (const seg of segs) {
      let c = n.children.get(seg);
      if (!c) {
        c = node();
        n.children.set(seg, c);
      }
      n = c;
    }
    return n;
  }

  /**
   * The nodes at `segs`' depth that `segs` subsumes: equal to it segment by segment, or anything where
   * `segs` has a `*` (a `*` node under a plain segment is not subsumed). Their subtrees are subsumed too.
   * Returns how many; the nodes are the first ones of `levelA` (scratch space, valid until the next call).
   */
  private subsumed(segs: readonly string[]): number {
    let level = this.levelA;
    let next = this.levelB;
    level[0] = this.root;
    let size = 1;
    for (let depth = 0; depth < segs.length; depth++) {
      const seg = segs[depth] as string;
      let count = 0;
      for (let j = 0; j < size; j++) {
        const n = level[j] as TrieNode;
        if (seg === '*') for (const c of n.children.values()) next[count++] = c;
        else {
          const exact = n.children.get(seg);
          if (exact) next[count++] = exact;
        }
      }
      const done = level;
      level = next;
      next = done;
      size = count;
    }
    this.levelA = level;
    this.levelB = next;
    return size;
  }

  /**
   * Records a read. When this reader waits for a writer that waited for the node's earlier readers, it
   * is ordered after all of them, so it stands in for them: a later writer of an overlapping key meets
   * this node and waits for it. Without this, readers of a prefix (`file:/repo/d1`) would pile up under
   * writes of the keys below it and every such write would wait for all of them (quadratic).
   */
  private insertRead(call: number, k: Key): void {
    const n = this.path(k.segs);
    if (n.waitedBy >= 0 && this.waitsFor(n.waitedBy)) {
      n.readers = n.readers.slice(n.waitedCount);
      n.waitedBy = -1;
    }
    n.readers.push({ call, key: k.text });
  }

  private insertWrite(call: number, k: Key): void {
    // Every node this write subsumes is now ordered before it, and a later access that overlaps such
    // a node also overlaps this write's own node and finds it there, so their entries can go. Only
    // subsumed nodes: a `*` node that merely overlaps the write (`a:*` under a write of `a:b`) must
    // stay, since `a:c` overlaps it and not the write.
    const count = this.subsumed(k.segs);
    for (let j = 0; j < count; j++) {
      const n = this.levelA[j] as TrieNode;
      n.writer = null;
      n.readers = [];
      n.waitedBy = -1;
      n.children.clear();
    }
    const own = this.path(k.segs);
    own.writer = { call, key: k.text };
    own.readers = [];
    own.waitedBy = -1;
  }

  /**
   * The hazards found by the earlier call, in place. An insertion sort: there are a few per call.
   * (Each earlier call is found once, so any sort gives the same order.)
   */
  private sortByFrom(): void {
    const { froms, kinds, keys } = this;
    for (let i = 1; i < this.count; i++) {
      const from = froms[i] as number;
      const kind = kinds[i] as HazardKind;
      const key = keys[i] as string;
      let j = i - 1;
      for (; j >= 0 && (froms[j] as number) > from; j--) {
        froms[j + 1] = froms[j] as number;
        kinds[j + 1] = kinds[j] as HazardKind;
        keys[j + 1] = keys[j] as string;
      }
      froms[j + 1] = from;
      kinds[j + 1] = kind;
      keys[j + 1] = key;
    }
  }
}

/**
 * The reason of a conflict edge. Reasons repeat (every edge on one key says the same few things), so
 * each one is made once and shared: at 100k calls that is one string instead of one per edge.
 */
export function describeHazard(kind: HazardKind, key: string): string {
  const byKind = REASONS.get(key, noReasons);
  return (byKind[kind] ??= [kind, ' on ', key].join(''));
}

/** The reasons of each key, by kind (pure, shared process-wide: see memo.ts). */
const REASONS = new Memo<Record<HazardKind, string | undefined>>(50_000);

function noReasons(): Record<HazardKind, string | undefined> {
  return { 'read-after-write': undefined, 'write-after-read': undefined, 'write-after-write': undefined };
}
