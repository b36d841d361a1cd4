/**
 * A bounded memo table for a pure function of a string: the one kind of process-wide state the core
 * keeps (DESIGN §19). A value depends on its key alone, so whichever scheduler, plan or test filled an
 * entry, every reader gets what it would have computed itself: sharing the table across the schedulers
 * of a process saves work and leaks nothing between them. The table is cleared whole when it passes its
 * bound, so no input can make it grow without end.
 *
 * Used for parsed resource keys and compiled templates (resources.ts), glob patterns (policy.ts) and
 * conflict reasons (hazards.ts). Anything that is not a pure function of its key (scratch buffers,
 * counters, the state of a run) belongs to the instance that uses it, never here.
 */
export class Memo<V> {
  private readonly table = new Map<string, V>();

  /** @param max how many entries at most (the table is cleared when a new one would pass it) */
  constructor(private readonly max: number) {}

  /** The value of `key`, made by `make` the first time (and again after a clear). */
  get(key: string, make: (key: string) => V): V {
    let v = this.table.get(key);
    if (v === undefined) {
      v = make(key);
      if (this.table.size >= this.max) this.table.clear();
      this.table.set(key, v);
    }
    return v;
  }

  /** How many entries it holds now (for tests of the bound). */
  get size(): number {
    return this.table.size;
  }
}
