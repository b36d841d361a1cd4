// The Limits page (#/limits): contention, live. Every limit and lock in use (GET /v1/limits, read
// again every second): how full it is, who holds it, how many calls wait behind it and for how long.
// The ones that hold calls back come first, the longest wait first.

import { api } from '../api.js';
import { el, errorText, find } from '../dom.js';
import { esc, fmtMs, plural } from '../util.js';
import { limitName, pausedText } from '../waiting.js';

/**
 * What `GET /v1/limits` says of flow control (DESIGN §4), when the server has it: each busy key of a
 * keyed limit, and each paused tool (or keyed group of one).
 * @typedef {{ pattern: string, tool?: string, key: string, limit: number, inUse: number }} BusyKey
 * @typedef {{ tool: string, key?: string, until: string | number, status?: number }} PausedTool
 * @typedef {{ keys?: BusyKey[], paused?: PausedTool[] }} FlowLimits
 */

/**
 * The busy keys as table rows, the fullest first.
 * @param {BusyKey[]} keys
 */
export function keysHtml(keys) {
  return [...keys]
    .sort((a, b) => b.inUse / b.limit - a.inUse / a.limit || a.key.localeCompare(b.key))
    .map(
      (k) => `<tr class="${k.inUse >= k.limit ? 'full' : ''}" data-key="${esc(k.key)}">
        <th scope="row"><code>${esc(k.key)}</code>${k.tool ? ` <span class="muted">of ${esc(k.tool)}</span>` : ''}</th>
        <td><code>${esc(k.pattern)}</code></td>
        <td class="c-use"><meter min="0" max="${k.limit}" value="${Math.min(k.inUse, k.limit)}" aria-hidden="true"></meter> ${esc(`${k.inUse} of ${k.limit}`)}</td>
      </tr>`,
    )
    .join('');
}

/**
 * The paused tools as list items: "api paused until 12:04:05 by a 429 from api".
 * @param {PausedTool[]} paused
 */
export function pausedHtml(paused) {
  return paused.map((p) => `<li data-tool="${esc(p.tool)}"><strong>${esc(p.tool)}</strong> ${esc(pausedText(p))}</li>`).join('');
}

const EVERY_MS = 1000;

export class LimitsPage {
  constructor() {
    this.el = el(`<section class="page limits-page">
      <div class="page-head"><h1 tabindex="-1">Limits</h1><span class="live" data-state="connecting" role="status">Connecting…</span></div>
      <p class="limits-summary muted"></p>
      <div class="table-wrap"><table class="runs limits">
        <caption class="sr-only">Limits and locks in use, those that hold calls back first</caption>
        <thead><tr><th scope="col">Limit</th><th scope="col">In use</th><th scope="col">Waiting</th><th scope="col">Longest wait</th><th scope="col">Held by</th></tr></thead>
        <tbody></tbody>
      </table></div>
      <p class="empty" hidden>No limit or lock is in use: nothing runs, nothing waits.</p>
      <section class="busy-keys" hidden><h2>Busy keys</h2><div class="table-wrap"><table class="runs keys">
        <caption class="sr-only">Keyed limits with calls running, the fullest first</caption>
        <thead><tr><th scope="col">Key</th><th scope="col">Pattern</th><th scope="col">In use</th></tr></thead>
        <tbody></tbody></table></div></section>
      <section class="paused-tools" hidden><h2>Paused tools</h2><ul class="paused"></ul></section>
      <p class="list-error" role="alert" hidden></p>
    </section>`);
  }

  start() {
    document.title = 'toolgraph · limits';
    find(this.el, 'h1').focus({ preventScroll: true });
    this.load();
  }

  destroy() {
    this.destroyed = true;
    clearTimeout(this.timer);
    this.ac?.abort();
  }

  async load() {
    if (this.destroyed) return;
    this.ac = new AbortController();
    const state = find(this.el, '.live');
    const err = find(this.el, '.list-error');
    try {
      const body = /** @type {import('../api.js').Limits & FlowLimits} */ (await api('/v1/limits', { signal: this.ac.signal }));
      if (this.destroyed) return;
      this.render(body.items);
      this.renderFlow(body);
      err.hidden = true;
      state.dataset.state = 'open';
      state.textContent = 'Live';
    } catch (e) {
      if (/** @type {{ name?: string }} */ (e)?.name === 'AbortError' || this.destroyed) return;
      err.hidden = false;
      err.textContent = `Could not read the limits: ${errorText(e)}`;
      state.dataset.state = 'error';
      state.textContent = 'Live updates off';
      if (/** @type {{ status?: number }} */ (e)?.status === 403) return;
    }
    this.timer = setTimeout(() => this.load(), EVERY_MS);
  }

  /**
   * Busy keys and paused tools (DESIGN §4), when the server lists them.
   * @param {FlowLimits} body
   */
  renderFlow(body) {
    const keys = find(this.el, '.busy-keys');
    keys.hidden = !body.keys?.length;
    find(keys, 'tbody').innerHTML = keysHtml(body.keys ?? []);
    const paused = find(this.el, '.paused-tools');
    paused.hidden = !body.paused?.length;
    find(paused, 'ul').innerHTML = pausedHtml(body.paused ?? []);
  }

  /** @param {import('../api.js').Limits['items']} items */
  render(items) {
    const full = (/** @type {import('../api.js').Limits['items'][number]} */ l) =>
      l.waiting > 0 || (l.limit !== undefined && l.inUse >= l.limit);
    const sorted = [...items].sort(
      (a, b) => b.waiting - a.waiting || b.longestWaitMs - a.longestWaitMs || Number(full(b)) - Number(full(a)),
    );
    const waiting = items.reduce((n, l) => n + l.waiting, 0);
    find(this.el, '.limits-summary').textContent = items.length
      ? `${plural(items.length, 'limit or lock', 'limits and locks')} in use, ${items.filter(full).length} full; ${plural(waiting, 'call waits', 'calls wait')} behind them.`
      : '';
    find(this.el, '.empty').hidden = items.length > 0;
    find(this.el, 'tbody').innerHTML = sorted
      .map((l) => {
        const use =
          l.kind === 'lock'
            ? `${plural(l.inUse, 'holder')}`
            : l.kind === 'rate'
              ? `${l.inUse} of ${l.limit} tokens taken${l.retryAt ? `; next in ${fmtMs(Date.parse(l.retryAt) - Date.now())}` : ''}`
              : `${l.inUse} of ${l.limit}`;
        const holders = l.holders
          .map(
            (h) =>
              `<a href="#/runs/${encodeURIComponent(h.runId)}?call=${encodeURIComponent(h.callId)}" class="holder">run <code>${esc(h.runId)}</code> / call <code>${esc(h.callId)}</code></a> <span class="muted">for ${esc(fmtMs(Date.now() - Date.parse(h.since)))}</span>`,
          )
          .join('<br>');
        const more =
          l.inUse > l.holders.length && l.kind !== 'rate' ? `<br><span class="muted">and ${l.inUse - l.holders.length} more</span>` : '';
        return `<tr class="${full(l) ? 'full' : ''}${l.waiting ? ' contended' : ''}" data-kind="${esc(l.kind)}" data-key="${esc(l.key ?? '')}">
          <th scope="row">${limitName({ ...l, limit: undefined }, { html: true })}</th>
          <td class="c-use">${l.limit ? `<meter min="0" max="${l.limit}" value="${Math.min(l.inUse, l.limit)}" aria-hidden="true"></meter> ` : ''}${esc(use)}</td>
          <td class="c-waiting">${l.waiting ? `<strong>${l.waiting}</strong>` : '<span class="muted">0</span>'}</td>
          <td class="c-longest">${l.waiting ? esc(fmtMs(l.longestWaitMs)) : '<span class="muted">–</span>'}</td>
          <td class="c-holders">${holders || '<span class="muted">–</span>'}${more}</td>
        </tr>`;
      })
      .join('');
  }
}
