// The timeline (Gantt) of a run's attempts, from its events: for every call, the time it waited for
// a limit (ready → started, hatched), for a human (review, dotted), for its hooks (striped violet),
// its attempts (solid, by outcome) and the backoff before a retry (a thin dashed line).

import { esc, fmtMs } from './util.js';
import { waitText } from './waiting.js';

const ROW = 20;
const BAR = 12;
const GUTTER = 150;
const AXIS = 26;

/**
 * @param {number} span
 * @param {number} target
 */
function niceStep(span, target) {
  const raw = span / target;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

/**
 * What limits cost the run: calls that waited between ready and started, and how long in all.
 * @param {import('./model.js').RunModel} model
 */
export function waits(model) {
  let total = 0;
  let count = 0;
  /** @type {{ id: string, ms: number } | null} */
  let longest = null;
  for (const c of model.calls) {
    for (const a of c.timing.attempts) {
      if (a.readyAt === undefined) continue;
      const end = a.startedAt ?? a.waitEndAt;
      if (end === undefined) continue;
      const ms = end - a.readyAt;
      if (ms <= 0) continue;
      total += ms;
      count++;
      if (!longest || ms > longest.ms) longest = { id: c.id, ms };
    }
  }
  return { total, count, longest };
}

export class TimelineView {
  /**
   * @param {HTMLElement} root
   * @param {{ onOpen: (id: string | undefined) => void, onResize?: () => void }} opts
   */
  constructor(root, opts) {
    this.root = root;
    this.opts = opts;
    this.width = 0;
    new ResizeObserver((entries) => {
      const w = Math.round(entries[0].contentRect.width);
      if (w === this.width) return;
      this.width = w;
      opts.onResize?.();
    }).observe(root);
    root.addEventListener('click', (ev) => {
      const row = /** @type {SVGElement | null | undefined} */ (/** @type {Element} */ (ev.target).closest?.('[data-id]'));
      if (row) opts.onOpen(row.dataset.id);
    });
  }

  /**
   * @param {import('./model.js').RunModel} model
   * @param {number} now  the server's clock
   */
  render(model, now) {
    const t0 = model.t0;
    const end = model.endAt ?? Math.max(now, model.lastAt);
    const span = Math.max(1, end - t0);
    const width = Math.max(480, (this.width || 800) - 2);
    const plot = width - GUTTER - 16;
    const x = (/** @type {number} */ t) => GUTTER + ((t - t0) / span) * plot;
    const first = (/** @type {import('./model.js').Call} */ c) => {
      const a = c.timing.attempts[0];
      return c.review?.since ?? a?.readyAt ?? a?.startedAt ?? Infinity;
    };
    const rows = [...model.calls].sort((a, b) => first(a) - first(b) || a.index - b.index);
    const height = AXIS + rows.length * ROW + 8;
    const step = niceStep(span, Math.max(2, Math.floor(plot / 110)));
    const ticks = [];
    for (let t = 0; t <= span + 1e-9; t += step) {
      const px = x(t0 + t);
      ticks.push(
        `<line class="tick" x1="${px}" x2="${px}" y1="${AXIS - 6}" y2="${height}"/><text class="tick-label" x="${px}" y="${AXIS - 10}" text-anchor="middle">${esc(fmtMs(t))}</text>`,
      );
    }
    /** @type {string[]} */
    const out = [];
    rows.forEach((c, i) => {
      const y = AXIS + i * ROW;
      const by = y + (ROW - BAR) / 2;
      const parts = [`<rect class="row-bg${i % 2 ? ' odd' : ''}" x="0" y="${y}" width="${width}" height="${ROW}"/>`];
      parts.push(
        `<text class="row-label" x="${GUTTER - 8}" y="${y + ROW / 2 + 4}" text-anchor="end">${esc(c.id.length > 20 ? `${c.id.slice(0, 19)}…` : c.id)}</text>`,
      );
      if (c.review?.since !== undefined) {
        const to = c.review.decidedAt ?? c.timing.endAt ?? end;
        parts.push(
          bar(
            'review',
            x(c.review.since),
            x(to),
            by,
            `${c.id} awaited review for ${fmtMs(to - c.review.since)}${c.review.decision ? ` (${c.review.decision})` : ''}`,
          ),
        );
      }
      for (const h of c.timing.hooks ?? []) {
        const what = `${c.id}: hook ${h.hook} (${h.on}) decided ${h.decision} in ${fmtMs(h.to - h.from)}${h.reason ? ` — ${h.reason}` : ''}${h.error ? ` (${h.error})` : ''}`;
        parts.push(bar(`hook d-${h.decision}`, x(h.from), x(h.to), by, what));
      }
      for (const a of c.timing.attempts) {
        if (a.readyAt !== undefined) {
          const to = a.startedAt ?? a.waitEndAt ?? (c.status === 'ready' ? end : undefined);
          const what = a.waits?.length ? a.waits.map(waitText).join(', then ') : 'a limit';
          if (to !== undefined && to - a.readyAt > 0) {
            parts.push(
              bar(
                'wait',
                x(a.readyAt),
                x(to),
                by,
                `${c.id} attempt ${a.n}: ready, waited ${fmtMs(to - a.readyAt)} for ${what}${a.startedAt === undefined ? ' so far' : ' before it started'}`,
              ),
            );
            // The limit of the wait, on the bar when there is room for it.
            const last = a.waits?.[a.waits.length - 1];
            const name = last ? `${last.kind}${last.key !== undefined && last.kind !== 'perRun' ? ` ${last.key}` : ''}` : '';
            if (name && x(to) - x(a.readyAt) > name.length * 6.5 + 8)
              parts.push(`<text class="wait-label" x="${x(a.readyAt) + 4}" y="${by + BAR - 2}">${esc(name)}</text>`);
          }
        }
        if (a.startedAt !== undefined) {
          const to = a.endedAt ?? end;
          const outcome = a.outcome ?? 'running';
          parts.push(
            bar(
              `run o-${outcome}`,
              x(a.startedAt),
              x(to),
              by,
              `${c.id} attempt ${a.n}: ${outcome === 'running' ? 'running for' : `${outcome} after`} ${fmtMs(to - a.startedAt)}${a.error ? ` — ${a.error.code}: ${a.error.message}` : ''}`,
            ),
          );
        }
        if (a.outcome === 'retry' && a.retryAt !== undefined && a.endedAt !== undefined) {
          parts.push(
            `<line class="backoff" x1="${x(a.endedAt)}" x2="${x(Math.min(a.retryAt, end))}" y1="${by + BAR / 2}" y2="${by + BAR / 2}"><title>${esc(`${c.id}: retry backoff ${fmtMs(a.retryAt - a.endedAt)}`)}</title></line>`,
          );
        }
      }
      if ((c.status === 'blocked' || c.status === 'cancelled') && c.timing.endAt !== undefined && c.timing.attempts.length === 0) {
        parts.push(
          `<text class="mark" x="${x(c.timing.endAt) + 3}" y="${y + ROW / 2 + 4}">${c.status === 'blocked' ? '⊘ blocked' : '– cancelled'}<title>${esc(`${c.id}: ${c.status}`)}</title></text>`,
        );
      }
      out.push(`<g class="trow" data-id="${esc(c.id)}">${parts.join('')}</g>`);
    });
    const w = waits(model);
    this.root.innerHTML = `<svg class="timeline" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${esc(
      `Timeline of ${rows.length} calls over ${fmtMs(span)}. ${w.count ? `${w.count} attempts waited for a limit, ${fmtMs(w.total)} in all` : 'No call waited for a limit'}.`,
    )}">${TL_DEFS}${ticks.join('')}${out.join('')}</svg>`;
  }
}

/**
 * @param {string} cls
 * @param {number} x1
 * @param {number} x2
 * @param {number} y
 * @param {string} title
 */
function bar(cls, x1, x2, y, title) {
  const w = Math.max(2, x2 - x1);
  return `<rect class="bar ${cls}" x="${x1}" y="${y}" width="${w}" height="${BAR}" rx="2"><title>${esc(title)}</title></rect>`;
}

const TL_DEFS = `<defs>
<pattern id="tl-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="2.5" height="6" class="tl-hatch-ink"/></pattern>
<pattern id="tl-dots" width="5" height="5" patternUnits="userSpaceOnUse"><circle cx="2.5" cy="2.5" r="1" class="tl-dot-ink"/></pattern>
</defs>`;
