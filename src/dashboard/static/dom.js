// Small DOM and address helpers shared by the pages and panels: an element from an HTML string, an
// error's text for a message, a button that opens a call, and the hash route (#/path?query).

import { ApiError } from './api.js';
import { esc } from './util.js';

/**
 * The first element of an HTML string.
 * @param {string} html
 * @returns {HTMLElement}
 */
export function el(html) {
  const t = document.createElement('template');
  t.innerHTML = html.trim();
  return /** @type {HTMLElement} */ (t.content.firstElementChild);
}

/**
 * The element of `root` that `selector` names, in markup the page wrote itself, so it is there: a miss
 * (or an element of another kind than `type`, HTMLElement unless said) is a bug, and throws.
 * @template {Element} [T=HTMLElement]
 * @param {ParentNode} root
 * @param {string} selector
 * @param {{ new (): T }} [type]  e.g. HTMLInputElement, SVGPathElement
 * @returns {T}
 */
export function find(root, selector, type) {
  const found = root.querySelector(selector);
  if (!(found instanceof (type ?? HTMLElement))) throw new Error(`no ${(type ?? HTMLElement).name} matches ${selector}`);
  return /** @type {T} */ (found);
}

/**
 * What to show of an error: an API error with its status and code, else its message.
 * @param {unknown} e
 */
export function errorText(e) {
  if (e instanceof ApiError) return `${e.message} (${e.status} ${e.code})`;
  return /** @type {{ message?: string } | null | undefined} */ (e)?.message ?? String(e);
}

/**
 * A button that names a call; a click on it opens the call (the run page listens for `data-open`).
 * @param {string} id
 */
export function callButton(id) {
  return `<button type="button" class="linklike" data-open="${esc(id)}"><code>${esc(id)}</code></button>`;
}

/** The route in the address: `#/runs/run_1?call=c1` → `{ path: '/runs/run_1', params }`. */
export function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  return { path, params };
}

/**
 * Changes the address without a new history entry (and without a hashchange).
 * @param {string} path
 * @param {URLSearchParams} params
 */
export function setHash(path, params) {
  const qs = params.toString();
  history.replaceState(null, '', `#${path}${qs ? `?${qs}` : ''}`);
}

/**
 * Marks the main navigation's link of `nav` ('runs', 'attention' or 'replicas') as the current page; null marks none.
 * @param {string | null} nav
 */
export function markNav(nav) {
  for (const a of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll('[data-nav]'))) {
    if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}
