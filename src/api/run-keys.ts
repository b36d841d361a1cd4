/**
 * One run per key (DESIGN §4): a submission with a `concurrencyKey` meets the tenant's earlier
 * unfinished runs of that key, found in the store (so on every replica), and by its `onConcurrent`
 * waits `queued` behind them (`queue`, the default: held by the engine, started by held-runs.ts), is
 * refused (`reject`: `409 concurrent_run` naming the run that holds the key) or cancels them
 * (`cancel_running`: their calls end `superseded`, naming the new run, through the ordinary cancel
 * path, which sends the cancel to another replica's run) and starts at once.
 *
 * Submissions of one tenant and key are taken one at a time in this process, so two of them cannot
 * both find the key free. Across replicas two submissions in the same instant may still both pass.
 */
import type { RunView } from '../core/view.js';
import type { SubmitRequest } from '../contract/submission.js';
import { newRunId } from '../engine/engine.js';
import type { Store } from '../store/types.js';
import { ApiError } from './errors.js';

export interface KeyedSubmission {
  store: Store;
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
    const holders = await o.store.runsHoldingKey(s.tenant, key);
    if (holders.length > 0 && strategy === 'reject') {
      throw new ApiError('concurrent_run', `run ${holders[0]} holds concurrencyKey ${JSON.stringify(key)}`, {
        runId: holders[0],
        concurrencyKey: key,
      });
    }
    // queue: held `queued` behind them (held-runs.ts starts it once they have ended).
    if (strategy === 'queue') return o.submit(holders.length > 0 ? { ...s, held: true } : s);
    const runId = s.runId ?? newRunId();
    for (const holder of holders) await o.cancel(holder, runId);
    return o.submit({ ...s, runId });
  })();
  o.pending.set(slot, turn);
  try {
    return await turn;
  } finally {
    if (o.pending.get(slot) === turn) o.pending.delete(slot);
  }
}
