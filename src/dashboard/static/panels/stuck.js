// The run page's "why calls are not done" panel: blocked calls, calls awaiting review, ready calls
// waiting for a limit and failed calls, each with its reason and the call it waits on.

import { callButton, find } from '../dom.js';
import { badge, esc, fmtMs, label } from '../util.js';
import { waitsHtml } from '../waiting.js';

/**
 * Fills `section` (the .stuck element) from model `m`; hidden when no call is stuck. A ready call
 * names what it waits for and who holds it, with links (`now`: the server's clock).
 * @param {HTMLElement} section
 * @param {import('../model.js').RunModel} m
 * @param {number} [now]
 */
export function renderStuck(section, m, now = Date.now()) {
  /** @type {Record<string, import('../model.js').Call[]>} */
  const groups = { blocked: [], awaiting_review: [], ready: [], failed: [] };
  for (const c of m.calls) if (groups[c.status]) groups[c.status].push(c);
  const item = (/** @type {import('../model.js').Call} */ c) => {
    const r = m.reason(c);
    const on =
      r?.on && r.on !== c.id
        ? ` · <span class="waits">waits on ${callButton(r.on)}${m.call(r.on) ? ` (${esc(label(m.call(r.on)?.status ?? ''))})` : ''}</span>`
        : '';
    if (r?.waits)
      return `<li data-call="${esc(c.id)}">${callButton(c.id)} — <span class="reason-text waiting-for">${waitsHtml(r.waits, now)}</span>${r.since ? ` <span class="muted">(waiting ${esc(fmtMs(now - Date.parse(r.since)))})</span>` : ''}</li>`;
    return `<li data-call="${esc(c.id)}">${callButton(c.id)} — <span class="code">${esc(r?.code ?? c.status)}</span>: <span class="reason-text">${esc(r?.text ?? '')}</span>${on}</li>`;
  };
  /** @type {Record<string, string>} */
  const titles = { blocked: 'Blocked', awaiting_review: 'Awaiting review', ready: 'Ready, waiting for a limit', failed: 'Failed' };
  const html = Object.entries(groups)
    .filter(([, list]) => list.length)
    .map(
      ([s, list]) =>
        `<div class="stuck-group st-${s}"><h3>${badge(s)} ${titles[s]} <span class="muted">(${list.length})</span></h3><ul>${list.slice(0, 30).map(item).join('')}</ul>${list.length > 30 ? `<p class="muted">and ${list.length - 30} more</p>` : ''}</div>`,
    )
    .join('');
  section.hidden = !html;
  find(section, '.stuck-body').innerHTML = html;
}
