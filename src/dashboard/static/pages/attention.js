// What makes a run need an operator, for the runs list's "needs attention" view: the statuses, the
// reasons shown beside a run (a call that has waited too long for a limit, or whose outcome is
// unknown, among them), and reading
// the calls of the runs the list's items say too little about.

import { CALL_STATUSES, fmtMs } from '../util.js';

/**
 * A run of the list: an item of GET /v1/runs, or more (`summarize()`, an `event: run` of /v1/stream:
 * its calls counted per status, its diagnostics' codes, since when a call waits).
 * @typedef {{ id: string, tenant: string, status: string, failure?: string, tags?: Record<string, string>,
 *   createdAt: string, endedAt: string | null, callCount: number, callCounts?: Record<string, number>,
 *   diagnostics?: string[], waitingSince?: string | null, owner?: string | null, outcomeUnknown?: number,
 *   priority?: number }} RunRow
 */

/** The ended statuses that need an operator. */
export const ATTENTION = ['deadlocked', 'needs_replan', 'failed', 'partial'];

/** A call that has waited this long for a limit or lock needs a look (the default; the page can change it). */
export const LONG_WAIT_S = 30;

/**
 * Since when the run's longest-waiting ready call waits (ISO), or null.
 * @param {import('../api.js').Run} view
 */
export function waitingSince(view) {
  /** @type {string | null} */
  let since = null;
  for (const c of view.calls) if (c.status === 'ready' && c.waitingSince && (!since || c.waitingSince < since)) since = c.waitingSince;
  return since;
}

/**
 * A run's view as a list item, with its calls counted per status (the list's items lack those).
 * @param {import('../api.js').Run} view
 * @returns {RunRow}
 */
export function summarize(view) {
  /** @type {Record<string, number>} */
  const callCounts = {};
  for (const s of CALL_STATUSES) callCounts[s] = 0;
  for (const c of view.calls) callCounts[c.status]++;
  return {
    id: view.id,
    tenant: view.tenant,
    status: view.status,
    failure: view.failure,
    tags: view.tags,
    createdAt: view.createdAt,
    endedAt: view.endedAt,
    callCount: view.calls.length,
    callCounts,
    diagnostics: view.diagnostics.map((d) => d.code),
    waitingSince: waitingSince(view),
    owner: view.owner ?? null,
    outcomeUnknown: view.calls.filter((c) => c.status === 'failed' && c.error?.code === 'outcome_unknown').length,
    ...(typeof (/** @type {{ priority?: unknown }} */ (view).priority) === 'number'
      ? { priority: /** @type {number} */ (/** @type {{ priority?: unknown }} */ (view).priority) }
      : {}),
  };
}

/**
 * `fn` over `items`, at most `n` at a time; a failure gives undefined.
 * @template T, U
 * @param {T[]} items
 * @param {number} n
 * @param {(item: T) => Promise<U>} fn
 */
export async function mapLimit(items, n, fn) {
  /** @type {(U | undefined)[]} */
  const out = [];
  let i = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (i < items.length) {
        const k = i++;
        out[k] = await fn(items[k]).catch(() => undefined);
      }
    }),
  );
  return out;
}

/**
 * Why run summary `r` needs an operator: [status, text] pairs (`reviewRuns`: run id → pending reviews;
 * a live run whose call has waited for a limit longer than `longWaitS` at `now`).
 * @param {RunRow} r
 * @param {Map<string, number>} reviewRuns
 * @param {number} [now]
 * @param {number} [longWaitS]
 */
export function attentionReasons(r, reviewRuns, now = Date.now(), longWaitS = LONG_WAIT_S) {
  /** @type {[string, string][]} */
  const out = [];
  if (r.waitingSince && !r.endedAt && now - Date.parse(r.waitingSince) >= longWaitS * 1000)
    out.push(['ready', `a call waiting ${fmtMs(now - Date.parse(r.waitingSince))} for a limit`]);
  const cc = r.callCounts;
  // Sent and unanswered (DESIGN §4): whether they took effect is unknown; someone must check.
  if (r.outcomeUnknown) out.push(['failed', `${r.outcomeUnknown} outcome unknown`]);
  if (r.status === 'deadlocked' || r.diagnostics?.includes('cycle'))
    out.push(['deadlocked', r.diagnostics?.includes('cycle') ? 'cycle' : 'deadlock']);
  if (r.status === 'needs_replan') out.push(['needs_replan', 'needs replan']);
  if (cc?.blocked) out.push(['blocked', `${cc.blocked} blocked`]);
  const reviews = cc ? cc.awaiting_review : reviewRuns.get(r.id);
  if (reviews) out.push(['awaiting_review', `${reviews} awaiting review`]);
  if (cc?.failed) out.push(['failed', `${cc.failed} failed`]);
  else if (!cc && (r.status === 'failed' || r.status === 'partial'))
    out.push([r.status, r.status === 'failed' ? 'failed' : 'some calls failed or blocked']);
  return out;
}
