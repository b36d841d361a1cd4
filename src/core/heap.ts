/** A binary min-heap with a comparator: the scheduler's timers, the simulation's queue, streamed planning. */
export class MinHeap<T> {
  private readonly items: T[] = [];

  constructor(private readonly less: (a: T, b: T) => number) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const a = this.items;
    // Sift up with a hole: parents move down until the item's place is found, then it is written once.
    let i = a.length;
    a.push(item);
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = a[p] as T;
      if (this.less(item, parent) >= 0) break;
      a[i] = parent;
      i = p;
    }
    a[i] = item;
  }

  pop(): T | undefined {
    const a = this.items;
    if (a.length === 0) return undefined;
    const top = a[0] as T;
    const last = a.pop() as T;
    const n = a.length;
    if (n > 0) {
      // Sift `last` down from the root with a hole: the smaller child moves up while it is smaller.
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const m = r < n && this.less(a[r] as T, a[l] as T) < 0 ? r : l;
        if (this.less(a[m] as T, last) >= 0) break;
        a[i] = a[m] as T;
        i = m;
      }
      a[i] = last;
    }
    return top;
  }

  /** Removes every item for which `drop` is true (O(n)); used when calls leave a ready set early. */
  removeWhere(drop: (item: T) => boolean): void {
    const keep = this.items.filter((x) => !drop(x));
    this.items.length = 0;
    for (const x of keep) this.push(x);
  }

  toArray(): T[] {
    return [...this.items];
  }
}

/**
 * A min-heap ordered by two numeric keys of each item (the first, then the second on a tie), read
 * once when the item is pushed and kept in arrays beside the items: a comparison reads those arrays
 * instead of two objects. The scheduler's ready sets hold tens of thousands of calls at 100k calls,
 * and the comparator loading each call's fields (scattered over the heap) was its hottest function.
 * The keys of an item must not change while it is in the heap.
 */
export class KeyedHeap<T> {
  private readonly items: T[] = [];
  private readonly first: number[] = [];
  private readonly second: number[] = [];

  constructor(
    private readonly firstKey: (item: T) => number,
    private readonly secondKey: (item: T) => number,
  ) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const a = this.items;
    const f = this.first;
    const s = this.second;
    const k1 = this.firstKey(item);
    const k2 = this.secondKey(item);
    // Sift up with a hole, as MinHeap does.
    let i = a.length;
    a.push(item);
    f.push(k1);
    s.push(k2);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(k1, k2, f[p] as number, s[p] as number)) break;
      a[i] = a[p] as T;
      f[i] = f[p] as number;
      s[i] = s[p] as number;
      i = p;
    }
    a[i] = item;
    f[i] = k1;
    s[i] = k2;
  }

  pop(): T | undefined {
    const a = this.items;
    const f = this.first;
    const s = this.second;
    if (a.length === 0) return undefined;
    const top = a[0] as T;
    const last = a.pop() as T;
    const k1 = f.pop() as number;
    const k2 = s.pop() as number;
    const n = a.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const m = r < n && less(f[r] as number, s[r] as number, f[l] as number, s[l] as number) ? r : l;
        if (!less(f[m] as number, s[m] as number, k1, k2)) break;
        a[i] = a[m] as T;
        f[i] = f[m] as number;
        s[i] = s[m] as number;
        i = m;
      }
      a[i] = last;
      f[i] = k1;
      s[i] = k2;
    }
    return top;
  }

  /** Removes every item for which `drop` is true (O(n)); used when calls leave a ready set early. */
  removeWhere(drop: (item: T) => boolean): void {
    const keep = this.items.filter((x) => !drop(x));
    this.items.length = 0;
    this.first.length = 0;
    this.second.length = 0;
    for (const x of keep) this.push(x);
  }
}

/**
 * Whether keys (a1, a2) come before (b1, b2). Written as the comparator `a1 - b1 || a2 - b2` would
 * decide it, NaN included (a NaN difference falls through to the second key, as `||` does).
 */
function less(a1: number, a2: number, b1: number, b2: number): boolean {
  const d = a1 - b1;
  return d < 0 || (!(d > 0) && a2 - b2 < 0);
}

/**
 * A min-heap of node indexes (each pushed at most once, so at most `n`) in one Int32Array: no
 * comparator call and no boxed entries per step, at 100k nodes a push and a pop each.
 */
export class IndexHeap {
  private readonly items: Int32Array;
  size = 0;

  constructor(n: number) {
    this.items = new Int32Array(n);
  }

  push(v: number): void {
    const a = this.items;
    let i = this.size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = a[parent] as number;
      if (p <= v) break;
      a[i] = p;
      i = parent;
    }
    a[i] = v;
  }

  pop(): number {
    const a = this.items;
    const top = a[0] as number;
    const n = --this.size;
    if (n > 0) {
      const last = a[n] as number;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const m = r < n && (a[r] as number) < (a[l] as number) ? r : l;
        if ((a[m] as number) >= last) break;
        a[i] = a[m] as number;
        i = m;
      }
      a[i] = last;
    }
    return top;
  }
}
