/**
 * Taking a dead replica's runs over, in parallel (DESIGN §12). One pass claims runs in batches of
 * `batch` (store/postgres/takeover.ts: `FOR UPDATE SKIP LOCKED`) and resumes them with at most
 * `concurrency` resumes at once. It claims the next batch only once fewer than `concurrency` claimed
 * runs wait for a worker, so a replica holds no more than it is about to resume, and every live replica
 * that scans meanwhile takes its share of the rest: two survivors split a dead replica's runs by how
 * fast each resumes them.
 *
 * A resume that fails (the store is away) stops the pass: what was claimed and not resumed stays owned
 * by this replica and is resumed by a later scan (cluster.ts reads the runs it owns but does not run).
 * A pass stops too once `active()` says no (the lease was lost, the replica closes).
 */

/** What a takeover pass needs: a claim of orphaned runs and a resume of one run. */
export interface TakeoverSource {
  /** Makes this replica the owner of up to `limit` runs whose owner's lease ended; their ids, oldest first. */
  claim(limit: number): Promise<string[]>;
  /** Takes one run back from the store; throws when the store is away. */
  resume(runId: string): Promise<void>;
  /** Whether the pass may go on (the lease it claimed under still holds, the replica is open). */
  active(): boolean;
  /** Told of each claimed batch, once claimed (their commands are sent here from now on). */
  claimed?(runIds: readonly string[]): void;
}

export interface TakeoverOptions {
  /** The most resumes at once (≥ 1). */
  concurrency: number;
  /** Runs claimed at a time (≥ 1); by default twice `concurrency`. */
  batch?: number;
}

export interface TakeoverPass {
  /** Every run claimed by this pass, in the order claimed. */
  claimed: string[];
  /** The runs resumed (of `own` and of `claimed`). */
  resumed: string[];
  /** Why the pass stopped early: a resume's or a claim's error; undefined when it ran to the end. */
  error?: unknown;
}

/**
 * One pass: resumes `own` (runs this replica owns but does not run) first, then claims and resumes
 * orphaned runs until a claim comes back short of a full batch.
 */
export async function takeOver(source: TakeoverSource, own: readonly string[], opts: TakeoverOptions): Promise<TakeoverPass> {
  const concurrency = Math.max(1, Math.floor(opts.concurrency));
  const batch = Math.max(1, Math.floor(opts.batch ?? concurrency * 2));
  const queue: string[] = [...own];
  const pass: TakeoverPass = { claimed: [], resumed: [] };
  let more = true;
  let stopped = false;
  let claiming: Promise<void> | undefined;

  const refill = async (): Promise<void> => {
    try {
      const ids = await source.claim(batch);
      if (ids.length < batch) more = false;
      if (ids.length === 0) return;
      pass.claimed.push(...ids);
      queue.push(...ids);
      source.claimed?.(ids);
    } catch (err) {
      // The store is away, likely: what is claimed is still resumed (or left for a later scan).
      more = false;
      pass.error ??= err;
    }
  };

  const next = async (): Promise<string | undefined> => {
    for (;;) {
      if (stopped || !source.active()) {
        stopped = true;
        return undefined;
      }
      if (more && claiming === undefined && queue.length < concurrency)
        claiming = refill().finally(() => {
          claiming = undefined;
        });
      const id = queue.shift();
      if (id !== undefined) return id;
      if (claiming === undefined) return undefined;
      await claiming;
    }
  };

  const worker = async (): Promise<void> => {
    for (let id = await next(); id !== undefined; id = await next()) {
      try {
        await source.resume(id);
        pass.resumed.push(id);
      } catch (err) {
        stopped = true;
        pass.error ??= err;
      }
    }
  };

  await Promise.all(Array.from({ length: concurrency }, worker));
  await claiming;
  return pass;
}
