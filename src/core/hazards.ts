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

export type HazardKind = 'read-after-write' | 'write-after-read' | 'write-after-write';

interface Entry {
  call: number;
  key: string;
}

interface TrieNode {
  children: Map<string, TrieNode>;
  writer: Entry | null;
  readers: Entry[];
  /** The last writer that waited for `readers[0..count)` (a writer of a key that overlaps this one). */
  waited: { call: number; count: number } | null;
}

function node(): TrieNode {
  return { children: new Map(), writer: null, readers: [], waited: null };
}

export interface Hazard {
  from: number;
  kind: HazardKind;
  /** The key of the earlier access. */
  key: string;
}

export class HazardIndex {
  private readonly root = node();

  /** The hazards of `call` against every earlier call, then records its accesses. */
  add(call: number, access: Access): Hazard[] {
    const found = new Map<number, Hazard>();
    const note = (e: Entry | null, kind: HazardKind) => {
      if (e && e.call !== call && !found.has(e.call)) found.set(e.call, { from: e.call, kind, key: e.key });
    };
    for (const k of access.reads) {
      this.visit(k.segs, (n) => note(n.writer, 'read-after-write'), (n) => note(n.writer, 'read-after-write'));
    }
    const waitWriters = (n: TrieNode) => {
      if (n.readers.length > 0) {
        for (const r of n.readers) note(r, 'write-after-read');
        n.waited = { call, count: n.readers.length };
      } else note(n.writer, 'write-after-write');
    };
    for (const k of access.writes) this.visit(k.segs, waitWriters, waitWriters);
    for (const k of access.reads) this.insertRead(call, k, found);
    for (const k of access.writes) this.insertWrite(call, k);
    return [...found.values()].sort((a, b) => a.from - b.from);
  }

  /**
   * Calls `onPrefix` for every trie node whose key is a shorter overlapping key of `segs` (the root, the
   * empty key, included: it overlaps everything), and `onCover`
   * for every node at `segs`' depth that overlaps it and every node below those.
   */
  private visit(segs: readonly string[], onPrefix: (n: TrieNode) => void, onCover: (n: TrieNode) => void): void {
    let level: TrieNode[] = [this.root];
    for (let depth = 0; depth < segs.length; depth++) {
      const seg = segs[depth] as string;
      const next: TrieNode[] = [];
      for (const n of level) {
        onPrefix(n);
        if (seg === '*') for (const c of n.children.values()) next.push(c);
        else {
          const exact = n.children.get(seg);
          if (exact) next.push(exact);
          const star = n.children.get('*');
          if (star) next.push(star);
        }
      }
      level = next;
      if (level.length === 0) return;
    }
    const stack = [...level];
    while (stack.length > 0) {
      const n = stack.pop() as TrieNode;
      onCover(n);
      for (const c of n.children.values()) stack.push(c);
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
   */
  private subsumed(segs: readonly string[]): TrieNode[] {
    let level: TrieNode[] = [this.root];
    for (const seg of segs) {
      const next: TrieNode[] = [];
      for (const n of level) {
        if (seg === '*') for (const c of n.children.values()) next.push(c);
        else {
          const exact = n.children.get(seg);
          if (exact) next.push(exact);
        }
      }
      level = next;
    }
    return level;
  }

  /**
   * Records a read. When this reader waits for a writer that waited for the node's earlier readers, it
   * is ordered after all of them, so it stands in for them: a later writer of an overlapping key meets
   * this node and waits for it. Without this, readers of a prefix (`file:/repo/d1`) would pile up under
   * writes of the keys below it and every such write would wait for all of them (quadratic).
   */
  private insertRead(call: number, k: Key, waitsFor: ReadonlyMap<number, unknown>): void {
    const n = this.path(k.segs);
    if (n.waited && waitsFor.has(n.waited.call)) {
      n.readers = n.readers.slice(n.waited.count);
      n.waited = null;
    }
    n.readers.push({ call, key: k.text });
  }

  private insertWrite(call: number, k: Key): void {
    // Every node this write subsumes is now ordered before it, and a later access that overlaps such
    // a node also overlaps this write's own node and finds it there, so their entries can go. Only
    // subsumed nodes: a `*` node that merely overlaps the write (`a:*` under a write of `a:b`) must
    // stay, since `a:c` overlaps it and not the write.
    for (const n of this.subsumed(k.segs)) {
      n.writer = null;
      n.readers = [];
      n.waited = null;
      n.children.clear();
    }
    const own = this.path(k.segs);
    own.writer = { call, key: k.text };
    own.readers = [];
    own.waited = null;
  }
}

export function describeHazard(kind: HazardKind, key: string): string {
  return `${kind} on ${key}`;
}
