/**
 * One run per key (DESIGN §4): a submission with a `concurrencyKey` meets the tenant's earlier
 * unfinished runs of that key and by its `onConcurrent` waits `queued` behind them (`queue`, the
 * default: held by the engine, started by held-runs.ts), is refused (`reject`: `409 concurrent_run`
 * naming the run that holds the key) or cancels them (`cancel_running`: their calls end `superseded`,
 * naming the new run, through the ordinary cancel path, which sends the cancel to another replica's
 * run) and starts at once.
 *
 * The earlier runs come from a `KeyLedger`. On one process it is the store (`storeLedger`): submissions
 * of one tenant and key are taken one at a time here, each stored before the next looks. On several
 * replicas it is the cluster's claims (cluster/run-keys.ts): each submission claims its key in one
 * transaction under a lock of the key, so two submissions on two replicas in the same instant are
 * taken one after the other, and the later sees the earlier even before its run is stored.
 */
import type { RunView } from '../core/view.js';
import type { SubmitRequest } from '../contract/submission.js';
import { newRunId } from '../engine/engine.js';
import type { Store } from '../store/types.js';
import { ApiError } from './errors.js';

/** Where the runs holding a tenant's key are found, in the order they took it. */
export interface KeyLedger {
  /**
   * The runs that hold the key before `runId` (oldest first), and whether `runId` now holds it too
   * (after them). With `onlyIfFree`, `runId` takes it only when nobody holds it.
   */
  claim(c: { tenant: string; key: string; runId: string; onlyIfFree: boolean }): Promise<{ holders: string[]; claimed: boolean }>;
  /** Gives back the claim of a run that was not submitted after all. */
  drop(runId: string): void;
  /** The runs that hold the key now, in the order they took it. */
  holders(tenant: string, key: string): Promise<string[]>;
}

/** The ledger of one process: the store's unfinished runs of the key (runs are stored before the next submission looks). */
export function storeLedger(store: Store): KeyLedger {
  return {
    claim: async (c) => {
      const holders = await store.runsHoldingKey(c.tenant, c.key);
      return { holders, claimed: !(c.onlyIfFree && holders.length > 0) };
    },
    drop: () => {},
    holders: (tenant, key) => store.runsHoldingKey(tenant, key),
  };
}

export interface KeyedSubmission {
  ledger: KeyLedger;
  /** The submission, its tenant known. */
  request: SubmitRequest & { tenant: string };
  /** Cancels an earlier run of the key on behalf of the new one (`supersededBy`). */
  cancel: (runId: string, supersededBy: string) => Promise<unknown>;
  submit: (s: SubmitRequest & { tenant: string }) => Promise<RunView>;
  /** The submissions of each tenant and key under way in this process. */
  pending: Map<string, Promise<unknown>>;
}

/** Submits `o.request` under its `concurrencyKey`'s strategy (a plain submit without one). */
export async function submitKeyed(o: KeyedSubmission): Promise<RunView> {
  const s = o.request;
  const key = s.concurrencyKey;
  if (key === undefined) return o.submit(s);
  const strategy = s.onConcurrent ?? 'queue';
  const slot = `${s.tenant}\u0000${key}`;
  const before = o.pending.get(slot);
  const turn = (async () => {
    await before?.catch(() => undefined);
    const runId = s.runId ?? newRunId();
    const { holders, claimed } = await o.ledger.claim({ tenant: s.tenant, key, runId, onlyIfFree: strategy === 'reject' });
    if (!claimed) {
      throw new ApiError('concurrent_run', `run ${holders[0]} holds concurrencyKey ${JSON.stringify(key)}`, {
        runId: holders[0],
        concurrencyKey: key,
      });
    }
    try {
      // queue: held `queued` behind them (held-runs.ts starts it once they have ended).
      if (strategy === 'queue') return await o.submit(holders.length > 0 ? { ...s, runId, held: true } : { ...s, runId });
      for (const holder of holders) await o.cancel(holder, runId);
      return await o.submit({ ...s, runId });
    } catch (err) {
      o.ledger.drop(runId);
      throw err;
    }
  })();
  o.pending.set(slot, turn);
  try {
    return await turn;
  } finally {
    if (o.pending.get(slot) === turn) o.pending.delete(slot);
  }
}
