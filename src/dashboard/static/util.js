// Small helpers shared by the dashboard's modules. Plain ES modules, no build step.

/** @type {Record<string, string>} */
const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/**
 * Escapes text for HTML and SVG markup (element content and quoted attributes).
 * @param {unknown} value
 */
export function esc(value) {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ESC[c]);
}

export const RUN_STATUSES = ['queued', 'running', 'succeeded', 'partial', 'failed', 'needs_replan', 'deadlocked', 'cancelled'];
export const CALL_STATUSES = ['pending', 'ready', 'running', 'awaiting_review', 'succeeded', 'failed', 'blocked', 'cancelled'];
export const ENDED_RUN = new Set(['succeeded', 'partial', 'failed', 'needs_replan', 'deadlocked', 'cancelled']);
export const ENDED_CALL = new Set(['succeeded', 'failed', 'blocked', 'cancelled']);

/**
 * A glyph per status, so that a status never rests on colour alone (the text is always there too).
 * @type {Record<string, string>}
 */
export const GLYPH = {
  queued: '○',
  pending: '○',
  ready: '◔',
  running: '▶',
  awaiting_review: '?',
  succeeded: '✓',
  partial: '◑',
  failed: '✗',
  blocked: '⊘',
  cancelled: '–',
  needs_replan: '↻',
  deadlocked: '∞',
};

/** @param {string} status */
export function label(status) {
  return String(status).replace(/_/g, ' ');
}

/**
 * A status badge: glyph + text; colour comes from the class.
 * @param {string} status
 */
export function badge(status) {
  return `<span class="badge st-${esc(status)}"><span aria-hidden="true">${GLYPH[status] ?? '•'}</span> ${esc(label(status))}</span>`;
}

/** @param {number | null | undefined} ms */
export function fmtMs(ms) {
  if (ms == null || !Number.isFinite(ms)) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60_000);
  if (m < 60) return `${m} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** @param {string | null | undefined} iso */
export function fmtTime(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  return d.toLocaleString(undefined, {
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
}

/**
 * @param {string | null | undefined} iso
 * @param {number} [now]
 */
export function ago(iso, now = Date.now()) {
  if (!iso) return '–';
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 5) return 'just now';
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

const MAX_JSON = 20_000;

/**
 * Pretty JSON for a <pre>, cut at 20 000 characters.
 * @param {unknown} value
 */
export function json(value) {
  /** @type {string | undefined} */
  let text;
  try {
    text = JSON.stringify(value, null, 2);
  } catch {
    text = String(value);
  }
  if (text === undefined) return 'undefined';
  return text.length > MAX_JSON ? `${text.slice(0, MAX_JSON)}\n… (${text.length - MAX_JSON} more characters)` : text;
}

/**
 * Calls `fn` at most once per animation frame, however often `schedule` is called.
 * @param {() => void} fn
 */
export function frameScheduler(fn) {
  let pending = 0;
  return function schedule() {
    if (pending) return;
    pending = requestAnimationFrame(() => {
      pending = 0;
      fn();
    });
  };
}

/**
 * Calls `fn` at most once per `ms` (trailing).
 * @param {() => void} fn
 * @param {number} ms
 */
export function throttle(fn, ms) {
  let timer = 0;
  let last = 0;
  return function run() {
    if (timer) return;
    const wait = Math.max(0, last + ms - Date.now());
    timer = setTimeout(() => {
      timer = 0;
      last = Date.now();
      fn();
    }, wait);
  };
}

/**
 * Says something to screen readers (a polite live region).
 * @param {string} text
 */
export function announce(text) {
  const el = document.getElementById('announcer');
  if (!el) return;
  el.textContent = '';
  setTimeout(() => (el.textContent = text), 30);
}

/**
 * @param {number} n
 * @param {string} one
 * @param {string} [many]
 */
export function plural(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}
