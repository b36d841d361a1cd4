// What makes a run need an operator, for the runs list's "needs attention" view: the statuses, the
// reasons shown beside a run (a call that has waited too long for a limit among them), and reading
// the calls of the runs the list's items say too little about.

import { CALL_STATUSES, fmtMs } from '../util.js';

/** The ended statuses that need an operator. */
export const ATTENTION = ['deadlocked', 'needs_replan', 'failed', 'partial'];

/** A call that has waited this long for a limit or lock needs a look (the default; the page can change it). */
export const LONG_WAIT_S = 30;

/** Since when the run's longest-waiting ready call waits (ISO), or null. */
export function waitingSince(view) {
  let since = null;
  for (const c of view.calls) if (c.status === 'ready' && c.waitingSince && (!since || c.waitingSince < since)) since = c.waitingSince;
  return since;
}

/** A run's view as a list item, with its calls counted per status (the list's items lack those). */
export function summarize(view) {
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
  };
}

/** `fn` over `items`, at most `n` at a time; a failure gives undefined. */
export async function mapLimit(items, n, fn) {
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
 */
export function attentionReasons(r, reviewRuns, now = Date.now(), longWaitS = LONG_WAIT_S) {
  const out = [];
  if (r.waitingSince && !r.endedAt && now - Date.parse(r.waitingSince) >= longWaitS * 1000)
    out.push(['ready', `a call waiting ${fmtMs(now - Date.parse(r.waitingSince))} for a limit`]);
  const cc = r.callCounts;
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
