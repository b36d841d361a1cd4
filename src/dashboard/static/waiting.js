// What a ready call waits for, in words (DESIGN §7 `waitingFor`): "waiting for lock file:* held by
// run … / call … for 3.1 s", with a link to each holder. Shared by the run page's panels, the
// timeline and the Limits page (whose items have the same kinds, keys and holders).

import { esc, fmtMs } from './util.js';

/**
 * @typedef {import('./view.js').WaitingView} WaitingView  a reason, as a call's `waitingFor` has it
 * @typedef {import('./view.js').WaitHolderView} WaitHolderView
 * @typedef {Pick<WaitingView, 'kind' | 'key' | 'limit' | 'inUse' | 'perMs' | 'domain'>} Limit  the limit of a reason (or of an item of GET /v1/limits)
 */

/** @type {Record<string, string>} */
const KIND = {
  global: 'the global limit',
  tenant: 'tenant limit',
  perRun: 'the per-run limit',
  tool: 'tool limit',
  resource: 'resource limit',
  rate: 'rate limit',
  lock: 'lock',
};

/**
 * The fields of the flow-control kinds (DESIGN §4): `key` (a keyed limit: `pattern`, the call's `key`
 * under it, the `tool` of a tool's `concurrency.per`) and `backoff` (a tool paused `until` by a 429 or
 * 503 of status `status`). Read when present: a server without them sends neither kind.
 * @typedef {{ pattern?: string, tool?: string, until?: string | number, status?: number }} FlowFields
 */

/**
 * `repo acme`, `deploy acme/web`: a keyed limit's key in words.
 * @param {{ key?: string } & FlowFields} w
 */
function keyName(w) {
  const key = w.key ?? '';
  if (w.tool) return `${w.tool} ${key}`;
  const colon = key.indexOf(':');
  return colon > 0 ? `${key.slice(0, colon)} ${key.slice(colon + 1)}` : key;
}

/**
 * `12:04:05`: a time of day (local), from ISO text or epoch ms.
 * @param {string | number | undefined} t
 */
export function clockTime(t) {
  const ms = typeof t === 'number' ? t : Date.parse(t ?? '');
  if (!Number.isFinite(ms)) return '?';
  return new Date(ms).toTimeString().slice(0, 8);
}

/**
 * `paused until 12:04:05 by a 429 from api`: a backoff in words.
 * @param {{ key?: string } & FlowFields} w
 */
export function pausedText(w) {
  const by = w.status ? `a ${w.status}` : 'backpressure';
  const from = w.tool ?? w.key ?? '?';
  const group = w.tool && w.key && w.key !== w.tool ? ` (${w.key})` : '';
  return `paused until ${clockTime(w.until)} by ${by} from ${from}${group}`;
}

/**
 * `3 per min`, `10 per 1 s`: a rate's tokens per period.
 * @param {number | undefined} limit
 * @param {number | undefined} perMs
 */
function per(limit, perMs) {
  if (perMs === 60_000) return `${limit} per min`;
  if (perMs === 1000) return `${limit} per s`;
  return `${limit} per ${fmtMs(perMs)}`;
}

/**
 * The limit itself, as text: `lock file:*`, `tool limit deploy (1 of 1 in use)`.
 * @param {Limit} w
 * @param {{ html?: boolean }} [options]
 */
export function limitName(w, { html = false } = {}) {
  const code = (/** @type {string} */ s) => (html ? `<code>${esc(s)}</code>` : s);
  const kind = /** @type {string} */ (w.kind);
  if (kind === 'key') {
    const f = /** @type {Limit & FlowFields} */ (w);
    const use = w.limit !== undefined ? ` (${w.inUse ?? '?'} of ${w.limit})` : '';
    return `${code(keyName(f))}${use}`;
  }
  if (kind === 'backoff') return esc(pausedText(/** @type {Limit & FlowFields} */ (w)));
  const key = w.key === undefined || w.kind === 'perRun' ? '' : ` ${code(w.key)}`;
  const use = w.kind === 'rate' ? ` (${per(w.limit, w.perMs)})` : w.limit !== undefined ? ` (${w.inUse ?? '?'} of ${w.limit} in use)` : '';
  const scope =
    w.kind === 'lock' && w.domain
      ? ` (${esc(w.domain === 'global' ? 'shared by every run' : `shared by ${w.domain.replace(/^tenant:/, 'tenant ')}`)})`
      : '';
  return `${KIND[w.kind] ?? esc(w.kind)}${key}${use}${scope}`;
}

/**
 * A link to a holder's call (another run's page, or this one's call).
 * @param {WaitHolderView} h
 */
function holderLink(h) {
  const href = `#/runs/${encodeURIComponent(h.runId)}?call=${encodeURIComponent(h.callId)}`;
  return `<a href="${esc(href)}" class="holder">run <code>${esc(h.runId)}</code> / call <code>${esc(h.callId)}</code></a>`;
}

/**
 * Who holds it, for how long (`now`: the server's clock), and how many more.
 * @param {WaitingView} w
 * @param {number} now
 */
function holdersHtml(w, now) {
  const list = w.holders ?? [];
  const named = list.map((h) => `${holderLink(h)} for ${esc(fmtMs(now - Date.parse(h.since)))}`);
  const more = (w.inUse ?? list.length) - list.length - (w.otherHolders ?? 0);
  if (w.otherHolders) named.push(`${w.otherHolders} of other tenants`);
  if (more > 0 && w.kind !== 'lock') named.push(`${more} more`);
  return named.join(', ');
}

/**
 * A reason in a few words, for a graph node: `lock file:*`, `tool deploy`, `global`.
 * @param {WaitingView} w
 */
export function shortWait(w) {
  const kind = /** @type {string} */ (w.kind);
  if (kind === 'key') return keyName(/** @type {WaitingView & FlowFields} */ (w));
  if (kind === 'backoff') return `paused ${/** @type {WaitingView & FlowFields} */ (w).tool ?? w.key ?? ''}`.trim();
  return w.kind === 'global' || w.kind === 'perRun'
    ? w.kind === 'global'
      ? 'the global limit'
      : 'the per-run limit'
    : `${w.kind} ${w.key}`;
}

/**
 * One reason as HTML, after "waiting for": what, held by whom since when, or when a token comes.
 * @param {WaitingView} w
 * @param {number} now
 */
export function waitHtml(w, now) {
  if (/** @type {string} */ (w.kind) === 'backoff') return limitName(w, { html: true });
  let text = limitName(w, { html: true });
  if (w.kind === 'rate' && w.retryAt) {
    const ms = Date.parse(w.retryAt) - now;
    text += ms > 0 ? `: next token in ${esc(fmtMs(ms))}` : ': a token is due now';
  } else if (w.kind === 'lock' || !w.queuedBehind?.length) {
    if (w.holders?.length || w.otherHolders) text += ` held by ${holdersHtml(w, now)}`;
    else if (w.queuedBehind?.length) text += `, queued behind ${w.queuedBehind.map(holderLink).join(', ')}, which asked first`;
  } else {
    // A counted limit with room, kept for a more urgent waiter (priority across replicas, DESIGN §4).
    if (w.holders?.length || w.otherHolders) text += ` held by ${holdersHtml(w, now)}`;
    text += `; the free place is kept for ${w.queuedBehind.map(holderLink).join(', ')}, more urgent`;
  }
  return text;
}

/**
 * One reason as plain text (a tooltip, a timeline bar).
 * @param {WaitingView | import('../../core/waiting.js').WaitReason} w  as a run's view or a `call.waiting` event has it
 */
export function waitText(w) {
  if (/** @type {string} */ (w.kind) === 'backoff') return pausedText(/** @type {typeof w & FlowFields} */ (w));
  const holders = (w.holders ?? []).map((h) => `run ${h.runId} / call ${h.callId}`);
  if (w.otherHolders) holders.push(`${w.otherHolders} of other tenants`);
  return `${limitName(w)}${holders.length ? ` held by ${holders.join(', ')}` : ''}`;
}

/**
 * A ready call's reasons as one sentence of HTML: "waiting for repo <code>acme</code> (2 of 2) held
 * by …", or, for a paused tool, "paused until 12:04:05 by a 429 from api".
 * @param {WaitingView[]} waits
 * @param {number} now
 */
export function waitsHtml(waits, now) {
  const paused = waits.filter((w) => /** @type {string} */ (w.kind) === 'backoff');
  const rest = waits.filter((w) => /** @type {string} */ (w.kind) !== 'backoff');
  const parts = paused.map((w) => waitHtml(w, now));
  if (rest.length) parts.push(`waiting for ${rest.map((w) => waitHtml(w, now)).join('; ')}`);
  return parts.join('; ');
}

/**
 * The same as plain text, with each reason's limit (no holders): the reason beside a call.
 * @param {WaitingView[]} waits
 */
export function waitsText(waits) {
  const paused = waits.filter((w) => /** @type {string} */ (w.kind) === 'backoff');
  const rest = waits.filter((w) => /** @type {string} */ (w.kind) !== 'backoff');
  const parts = paused.map((w) => limitName(w));
  if (rest.length) parts.push(`waiting for ${rest.map((w) => limitName(w)).join(', ')}`);
  return parts.join('; ');
}
