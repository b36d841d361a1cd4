/** A binary min-heap with a comparator; the scheduler's ready sets and the topological sort use it. */
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
