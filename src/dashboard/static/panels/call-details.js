// The run page's call details: one call's status, why it is not done, its review, its edges both
// ways, its attempts (time waiting for a limit, time running, outcome) and its args, output and errors.

import { callButton, find } from '../dom.js';
import { badge, esc, fmtMs, json, plural } from '../util.js';
import { waitHtml, waitText } from '../waiting.js';

/**
 * Shows call `selected` of model `m` in `panel` (hidden when there is none), keeping the panel's scroll
 * and focus. `serverNow()` is the server's clock (for a running attempt); `onClose` is the close button.
 * @param {HTMLElement} panel
 * @param {import('../model.js').RunModel} m
 * @param {string | null} selected
 * @param {{ serverNow: () => number, onClose: () => void }} options
 */
export function renderCallDetails(panel, m, selected, { serverNow, onClose }) {
  const c = selected ? m.call(selected) : undefined;
  if (!c) {
    panel.hidden = true;
    panel.innerHTML = '';
    return;
  }
  const focused = panel.contains(document.activeElement) ? /** @type {HTMLElement} */ (document.activeElement) : null;
  const focusKey = focused?.dataset?.open ?? (focused?.tagName === 'H2' ? 'h2' : focused?.classList?.contains('close') ? 'close' : null);
  const keepScroll = panel.scrollTop;
  const r = m.reason(c);
  const ins = m.edges.filter((e) => e.to === c.id);
  const outs = m.edges.filter((e) => e.from === c.id);
  /**
   * @param {import('../../../core/calls.js').Edge[]} list
   * @param {'from' | 'to'} key  the end to name
   */
  const edgeList = (list, key) =>
    list.length
      ? `<ul class="edges">${list
          .slice(0, 50)
          .map(
            (e) =>
              `<li><span class="ek k-${esc(e.kind)}">${esc(e.kind)}</span> ${callButton(e[key])} <span class="muted">${esc(e.reason)}</span></li>`,
          )
          .join('')}${list.length > 50 ? `<li class="muted">and ${list.length - 50} more</li>` : ''}</ul>`
      : '<p class="muted">none</p>';
  const attempts = c.timing.attempts.length
    ? `<table class="attempts"><thead><tr><th scope="col">#</th><th scope="col">Waited for a limit</th><th scope="col">Ran</th><th scope="col">Outcome</th></tr></thead><tbody>${c.timing.attempts
        .map((a) => {
          const waited = a.readyAt !== undefined ? (a.startedAt ?? a.waitEndAt ?? serverNow()) - a.readyAt : undefined;
          const ran = a.startedAt !== undefined ? (a.endedAt ?? serverNow()) - a.startedAt : undefined;
          const held = a.waits?.length ? ` <span class="muted">(${esc(a.waits.map(waitText).join('; then '))})</span>` : '';
          return `<tr><td>${a.n}</td><td>${fmtMs(waited)}${held}</td><td>${a.startedAt !== undefined ? fmtMs(ran) : 'not started'}</td><td>${esc(a.outcome ?? (a.startedAt !== undefined ? 'running' : 'waiting'))}${a.error ? ` — <code>${esc(a.error.code)}</code> ${esc(a.error.message ?? '')}` : ''}</td></tr>`;
        })
        .join('')}</tbody></table>`
    : '<p class="muted">No attempt yet.</p>';
  const hooks = c.timing.hooks?.length
    ? `<h3>Hooks</h3><table class="attempts"><thead><tr><th scope="col">Hook</th><th scope="col">On</th><th scope="col">Took</th><th scope="col">Decision</th></tr></thead><tbody>${c.timing.hooks
        .map(
          (h) =>
            `<tr><td><code>${esc(h.hook)}</code></td><td>${esc(h.on)}</td><td>${fmtMs(h.to - h.from)}</td><td><strong>${esc(h.decision)}</strong>${h.reason ? ` — ${esc(h.reason)}` : ''}${h.error ? ` <span class="muted">(${esc(h.error)})</span>` : ''}</td></tr>`,
        )
        .join('')}</tbody></table>`
    : '';
  const block = (/** @type {string} */ title, /** @type {unknown} */ value, cls = '') =>
    `<h3>${title}</h3><pre class="json ${cls}" tabindex="0">${esc(json(value))}</pre>`;
  const why =
    r && c.status !== 'succeeded' && c.status !== 'running'
      ? `<div class="why-box st-${esc(c.status)}">${
          r.waits
            ? `<p class="waiting-for"><strong>Waiting${r.since ? ` ${esc(fmtMs(serverNow() - Date.parse(r.since)))}` : ''}</strong> for ${r.waits.map((w) => waitHtml(w, serverNow())).join('; ')}</p>`
            : `<p><strong>${esc(r.code)}</strong>: ${esc(r.text)}</p>`
        }${
          r.on && r.on !== c.id ? `<p>Waits on ${callButton(r.on)}${m.call(r.on) ? ` — ${badge(m.call(r.on)?.status ?? '')}` : ''}</p>` : ''
        }${r.cycle ? `<p>Cycle: ${r.cycle.map(callButton).join(' → ')}</p>` : ''}</div>`
      : '';
  const review = c.review
    ? `<h3>Review</h3><p>${esc(c.review.reason)}${c.review.decision ? ` — decided: <strong>${esc(c.review.decision)}</strong>${c.review.comment ? ` (“${esc(c.review.comment)}”)` : ''}` : ' — <strong>waiting for a decision</strong> (see “Awaiting review” above)'}</p>`
    : '';
  panel.innerHTML = `<div class="details-head"><h2 id="dt-h" tabindex="-1">Call <code>${esc(c.id)}</code></h2><button type="button" class="close" aria-label="Close the call details">×</button></div>
    <p class="details-status">${badge(c.status)} <span class="muted">tool</span> <code>${esc(c.tool)}</code> · ${plural(c.attempts, 'attempt')}</p>
    ${why}
    ${review}
    <h3>Depends on</h3>${edgeList(ins, 'from')}
    <h3>Needed by</h3>${edgeList(outs, 'to')}
    <h3>Attempts</h3>${attempts}
    ${hooks}
    ${block('Args', c.args)}
    ${c.resolvedArgs !== undefined ? block('Resolved args', c.resolvedArgs) : ''}
    ${c.status === 'succeeded' || c.output != null ? block('Output', c.output) : ''}
    ${c.error ? block('Error', c.error, 'err') : ''}
    ${c.blockedBy ? block('Blocked by', c.blockedBy, 'err') : ''}
    ${c.compensation ? block('Compensation', c.compensation) : ''}
    <p class="muted small">Esc closes the details.</p>`;
  panel.hidden = false;
  panel.scrollTop = keepScroll;
  find(panel, '.close').addEventListener('click', onClose);
  if (focusKey === 'h2') find(panel, 'h2').focus({ preventScroll: true });
  else if (focusKey === 'close') find(panel, '.close').focus({ preventScroll: true });
  else if (focusKey)
    /** @type {HTMLElement | null} */ (panel.querySelector(`[data-open="${CSS.escape(focusKey)}"]`))?.focus({ preventScroll: true });
}
