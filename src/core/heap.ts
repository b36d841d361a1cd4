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
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.less(a[i] as T, a[p] as T) >= 0) break;
      [a[i], a[p]] = [a[p] as T, a[i] as T];
      i = p;
    }
  }

  pop(): T | undefined {
    const a = this.items;
    if (a.length === 0) return undefined;
    const top = a[0] as T;
    const last = a.pop() as T;
    if (a.length > 0) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && this.less(a[l] as T, a[m] as T) < 0) m = l;
        if (r < a.length && this.less(a[r] as T, a[m] as T) < 0) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m] as T, a[i] as T];
        i = m;
      }
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
