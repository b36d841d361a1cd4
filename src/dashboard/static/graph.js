// The run's DAG as SVG: columns are generations (a node is never left of a predecessor), nodes are
// coloured by status and also say it in words and with a pattern, edges are styled by kind and each
// carries its reason (<title>, focusable, a tooltip on hover or focus). Two stacked SVGs: the nodes on
// top and first in tab order, the edges beneath. The whole picture is laid out again only when calls
// or edges are added; a status change only updates its node.

import { find } from './dom.js';
import { shortWait } from './waiting.js';
import { esc, GLYPH, label } from './util.js';

/**
 * @typedef {import('./model.js').RunModel} RunModel
 * @typedef {import('./model.js').Call} Call
 * @typedef {ReturnType<RunModel['cycles']>} Cycles
 * @typedef {{ x: number, y: number, layer: number, row: number }} Pos  a node's place: its corner, column and row
 * @typedef {ReturnType<typeof layout>} Layout
 */

const W = 184;
const COL_GAP = 88;
const PAD = 20;
const TOP = 26;
/** Node height and the gap between rows: full nodes say id, status, tool and why; compact ones
 * (big graphs, where SVG text is most of the cost of a frame) say glyph, id and status. */
const FULL = { H: 58, GAP: 14 };
const COMPACT = { H: 30, GAP: 8 };
export const COMPACT_ABOVE = 150;

/**
 * Layers and positions. Cycles (reported by the plan) are cut so every call gets a place.
 * @param {RunModel} model
 * @param {{ H: number, GAP: number }} [sizes]  FULL or COMPACT
 */
export function layout(model, { H, GAP: ROW_GAP } = FULL) {
  const calls = model.calls;
  const n = calls.length;
  const index = new Map(calls.map((c, i) => [c.id, i]));
  /** @type {Map<string, number>} */
  const gen = new Map();
  model.generations.forEach((g, i) => {
    for (const id of g) gen.set(id, i);
  });
  const { members } = model.cycles();
  const preds = Array.from({ length: n }, () => /** @type {number[]} */ ([]));
  const succs = Array.from({ length: n }, () => /** @type {number[]} */ ([]));
  /** @type {Set<number>} */
  const seen = new Set();
  for (const e of model.edges) {
    const a = index.get(e.from);
    const b = index.get(e.to);
    if (a === undefined || b === undefined || a === b) continue;
    if (members.has(e.from) && members.has(e.to)) continue;
    const key = a * n + b;
    if (seen.has(key)) continue;
    seen.add(key);
    preds[b].push(a);
    succs[a].push(b);
  }
  /** @type {number[]} */
  const layer = new Array(n).fill(-1);
  const indeg = preds.map((p) => p.length);
  /** @type {number[]} */
  const queue = [];
  for (let i = 0; i < n; i++) if (indeg[i] === 0) queue.push(i);
  for (let q = 0; q < queue.length; q++) {
    const i = queue[q];
    let l = gen.get(calls[i].id) ?? 0;
    for (const p of preds[i]) l = Math.max(l, layer[p] + 1);
    layer[i] = l;
    for (const s of succs[i]) if (--indeg[s] === 0) queue.push(s);
  }
  // Anything left sits on an unreported cycle: after its placed predecessors.
  for (let i = 0; i < n; i++) {
    if (layer[i] >= 0) continue;
    let l = 0;
    for (const p of preds[i]) if (layer[p] >= 0) l = Math.max(l, layer[p] + 1);
    layer[i] = l;
  }
  /** @type {number[][]} */
  const columns = [];
  for (let i = 0; i < n; i++) (columns[layer[i]] ??= []).push(i);
  /** @type {number[]} */
  const row = new Array(n).fill(0);
  for (let l = 0; l < columns.length; l++) {
    const col = columns[l] ?? (columns[l] = []);
    if (l > 0) {
      /** @type {Map<number, number>} */
      const key = new Map();
      for (const i of col) {
        const ps = preds[i];
        key.set(i, ps.length ? ps.reduce((s, p) => s + row[p], 0) / ps.length : Infinity);
      }
      col.sort((a, b) => /** @type {number} */ (key.get(a)) - /** @type {number} */ (key.get(b)) || a - b);
    }
    col.forEach((i, r) => {
      row[i] = r;
    });
  }
  // Arcs between calls of one column (a cycle) bulge out to the left of the first column.
  let left = PAD;
  for (const e of model.edges) {
    const a = index.get(e.from);
    const b = index.get(e.to);
    if (a !== undefined && b !== undefined && a !== b && layer[a] === 0 && layer[b] === 0) left = PAD + 56;
  }
  const tallest = Math.max(1, ...columns.map((c) => c.length));
  const height = TOP + PAD * 2 + tallest * H + (tallest - 1) * ROW_GAP;
  const width = left + PAD + Math.max(1, columns.length) * W + Math.max(0, columns.length - 1) * COL_GAP;
  /** @type {Map<string, Pos>} */
  const pos = new Map();
  const center = n <= 80;
  for (let l = 0; l < columns.length; l++) {
    const col = columns[l];
    const colH = col.length * H + Math.max(0, col.length - 1) * ROW_GAP;
    const offset = center ? (tallest * H + (tallest - 1) * ROW_GAP - colH) / 2 : 0;
    for (const i of col) {
      pos.set(calls[i].id, { x: left + l * (W + COL_GAP), y: TOP + PAD + offset + row[i] * (H + ROW_GAP), layer: l, row: row[i] });
    }
  }
  return { pos, columns: columns.map((c) => c.map((i) => calls[i].id)), width, height, H, left };
}

/**
 * @param {Pos} a
 * @param {Pos} b
 * @param {number} lane  the how-manieth edge between the two
 * @param {number} H  the node height
 */
function edgePath(a, b, lane, H) {
  if (a.layer === b.layer) {
    // Same column (a cycle): an arc on the right going down, on the left going up.
    const down = b.y > a.y;
    const x = down ? a.x + W : a.x;
    const bulge = (down ? 1 : -1) * (34 + Math.min(120, Math.abs(b.y - a.y) * 0.2) + lane * 8);
    const y1 = a.y + H / 2 + (down ? 8 : -8);
    const y2 = b.y + H / 2 + (down ? -8 : 8);
    return `M${x},${y1} C${x + bulge},${y1} ${x + bulge},${y2} ${x},${y2}`;
  }
  const forward = b.layer > a.layer;
  const x1 = forward ? a.x + W : a.x;
  const x2 = forward ? b.x : b.x + W;
  const y1 = a.y + H / 2 + lane * 5;
  const y2 = b.y + H / 2 + lane * 5;
  const dx = (forward ? 1 : -1) * Math.max(36, Math.abs(x2 - x1) * 0.45);
  return `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`;
}

/**
 * @param {unknown} text
 * @param {number} max
 */
function cut(text, max) {
  const s = String(text ?? '');
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** @type {Record<string, string>} */
const KIND_WORD = { data: 'data', conflict: 'conflict', policy: 'policy' };

export class GraphView {
  /**
   * @param {HTMLElement} root  an empty element; the view fills it
   * @param {{ onOpen: (id: string | undefined) => void }} opts
   */
  constructor(root, opts) {
    this.root = root;
    this.opts = opts;
    this.zoom = 1;
    this.structure = -1;
    /** @type {Map<string | null | undefined, SVGGElement>} the nodes by call id */
    this.nodes = new Map();
    root.classList.add('graph-wrap');
    root.innerHTML = `<div class="graph-canvas"><svg class="graph-nodes" role="group" aria-label="Calls of the run (Enter opens a call's details; arrow keys move between calls)"></svg><svg class="graph-edges" role="group" aria-label="Edges: why a call waits for another"></svg></div><div class="tooltip" role="tooltip" hidden></div>`;
    this.canvas = find(root, '.graph-canvas');
    this.svgNodes = find(root, '.graph-nodes', SVGSVGElement);
    this.svgEdges = find(root, '.graph-edges', SVGSVGElement);
    this.tooltip = find(root, '.tooltip');
    // The view's width, known without forcing a layout while drawing.
    this.width = 0;
    new ResizeObserver((entries) => (this.width = entries[0].contentRect.width)).observe(root);
    this.bind();
  }

  bind() {
    const nodeOf = (/** @type {EventTarget | null} */ t) =>
      /** @type {SVGGElement | null | undefined} */ (/** @type {Element} */ (t).closest?.('.node'));
    const edgeOf = (/** @type {EventTarget | null} */ t) =>
      /** @type {SVGGElement | null | undefined} */ (/** @type {Element} */ (t).closest?.('.edge'));
    this.root.addEventListener('click', (ev) => {
      const node = nodeOf(ev.target);
      if (node) this.opts.onOpen(node.dataset.id);
    });
    this.root.addEventListener('keydown', (ev) => {
      const node = nodeOf(ev.target);
      if (node) {
        if (ev.key === 'Enter' || ev.key === ' ') {
          ev.preventDefault();
          this.opts.onOpen(node.dataset.id);
        } else if (['ArrowUp', 'ArrowDown', 'ArrowLeft', 'ArrowRight'].includes(ev.key)) {
          const next = this.neighbour(/** @type {string} */ (node.dataset.id), ev.key);
          if (next) {
            ev.preventDefault();
            this.focus(next);
          }
        }
        return;
      }
      const edge = edgeOf(ev.target);
      if (edge && (ev.key === 'Enter' || ev.key === ' ')) {
        ev.preventDefault();
        this.focus(edge.dataset.to);
      }
    });
    /**
     * @param {SVGGElement} edge
     * @param {number} x
     * @param {number} y
     */
    const show = (edge, x, y) => {
      this.tooltip.textContent = edge.querySelector('title')?.textContent ?? '';
      this.tooltip.hidden = false;
      const box = this.root.getBoundingClientRect();
      this.tooltip.style.left = `${Math.min(x - box.left + this.root.scrollLeft + 12, this.root.scrollLeft + box.width - 260)}px`;
      this.tooltip.style.top = `${y - box.top + this.root.scrollTop + 14}px`;
      edge.classList.add('hot');
    };
    const hide = (/** @type {SVGGElement | null | undefined} */ edge) => {
      this.tooltip.hidden = true;
      edge?.classList.remove('hot');
    };
    this.svgEdges.addEventListener('mousemove', (ev) => {
      const edge = edgeOf(ev.target);
      if (edge) show(edge, ev.clientX, ev.clientY);
    });
    this.svgEdges.addEventListener('mouseout', (ev) => hide(edgeOf(ev.target)));
    this.svgEdges.addEventListener('focusin', (ev) => {
      const edge = edgeOf(ev.target);
      if (!edge) return;
      const line = find(edge, '.line', SVGPathElement);
      const len = line.getTotalLength();
      const p = line.getPointAtLength(len / 2);
      const m = line.getScreenCTM();
      const pt = m ? new DOMPoint(p.x, p.y).matrixTransform(m) : { x: 0, y: 0 };
      show(edge, pt.x, pt.y);
    });
    this.svgEdges.addEventListener('focusout', (ev) => hide(edgeOf(ev.target)));
  }

  /**
   * @param {string} id
   * @param {string} key  an arrow key
   * @returns {string | undefined}
   */
  neighbour(id, key) {
    const p = this.layout?.pos.get(id);
    if (!p || !this.layout || !this.model) return undefined;
    const col = this.layout.columns[p.layer];
    if (key === 'ArrowUp') return col[p.row - 1];
    if (key === 'ArrowDown') return col[p.row + 1];
    const other = this.layout.columns[p.layer + (key === 'ArrowLeft' ? -1 : 1)];
    if (!other || other.length === 0) return undefined;
    // The nearest call of the next column, preferring a predecessor or successor.
    const linked = new Set(
      this.model.edges.filter((e) => (key === 'ArrowLeft' ? e.to === id : e.from === id)).map((e) => (key === 'ArrowLeft' ? e.from : e.to)),
    );
    const candidates = other.filter((o) => linked.has(o));
    const pool = candidates.length ? candidates : other;
    let best = pool[0];
    for (const o of pool)
      if (Math.abs(/** @type {Pos} */ (this.layout.pos.get(o)).y - p.y) < Math.abs(/** @type {Pos} */ (this.layout.pos.get(best)).y - p.y))
        best = o;
    return best;
  }

  /** @param {string | null | undefined} id */
  focus(id) {
    const el = this.nodes.get(id);
    if (!el) return;
    el.focus();
  }

  /** @param {number} z */
  setZoom(z) {
    this.zoom = Math.min(2, Math.max(0.1, z));
    this.size();
  }

  /** Zooms so the whole graph fits the width of the view (never above 100 %). */
  fit() {
    if (!this.layout) return;
    const avail = (this.width || this.root.clientWidth) - 4;
    this.setZoom(Math.min(1, avail / this.layout.width));
  }

  size() {
    if (!this.layout) return;
    const { width, height } = this.layout;
    for (const svg of [this.svgNodes, this.svgEdges]) {
      svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
      svg.setAttribute('width', String(Math.round(width * this.zoom)));
      svg.setAttribute('height', String(Math.round(height * this.zoom)));
    }
    this.canvas.style.width = `${Math.round(width * this.zoom)}px`;
    this.canvas.style.height = `${Math.round(height * this.zoom)}px`;
  }

  /**
   * Draws the model: a full layout when its structure changed (returns true), else only the changed
   * nodes (returns false).
   * @param {RunModel} model
   * @param {string | null} selected  the id of the selected call
   */
  render(model, selected) {
    let full = false;
    /** @type {RunModel | undefined} */
    this.model = model;
    const cycles = model.cycles();
    const cycleKey = [...cycles.members].join(',');
    if (model.structure !== this.structure || cycleKey !== this.cycleKey) {
      this.structure = model.structure;
      /** @type {string | undefined} */
      this.cycleKey = cycleKey;
      this.full(model, cycles, selected);
      full = true;
    } else {
      for (const id of model.changed) this.update(model, model.call(id), cycles, selected);
      if (selected !== this.selected) {
        for (const id of [this.selected, selected]) if (id && model.call(id)) this.update(model, model.call(id), cycles, selected);
      }
    }
    /** @type {string | null | undefined} */
    this.selected = selected;
    return full;
  }

  /**
   * @param {RunModel} model
   * @param {Cycles} cycles
   * @param {string | null} selected
   */
  full(model, cycles, selected) {
    const active = /** @type {HTMLElement | SVGElement | null} */ (document.activeElement);
    const refocus =
      active && this.root.contains(active) ? (active.dataset.id ? { node: active.dataset.id } : { edge: active.dataset.key }) : null;
    this.compact = model.calls.length > COMPACT_ABOVE;
    /** @type {Layout | undefined} */
    this.layout = layout(model, this.compact ? COMPACT : FULL);
    const { pos, columns, left } = this.layout;
    const heads = columns
      .map((_, l) => `<text class="gen" x="${left + l * (W + COL_GAP)}" y="${PAD + 6}">generation ${l + 1}</text>`)
      .join('');
    const nodes = [];
    for (const c of model.calls) {
      const p = /** @type {Pos} */ (pos.get(c.id));
      nodes.push(this.nodeMarkup(model, c, p, cycles, selected));
    }
    this.svgNodes.innerHTML = `${DEFS}${heads}${nodes.join('')}`;
    /** @type {Map<string, number>} */
    const lanes = new Map();
    const edges = [];
    for (const e of model.edges) {
      const a = pos.get(e.from);
      const b = pos.get(e.to);
      if (!a || !b || e.from === e.to) continue;
      const pair = `${e.from}→${e.to}`;
      const lane = lanes.get(pair) ?? 0;
      lanes.set(pair, lane + 1);
      const onCycle = cycles.edges.has(pair) || (cycles.members.has(e.from) && cycles.members.has(e.to) && e.kind !== 'conflict');
      const kind = KIND_WORD[e.kind] ?? 'data';
      const text = `${kind} edge ${e.from} → ${e.to}: ${e.reason}${onCycle ? ' (on the cycle)' : ''}`;
      const d = edgePath(a, b, lane, this.layout.H);
      edges.push(
        `<g class="edge k-${kind}${onCycle ? ' cycle' : ''}" tabindex="0" role="button" data-from="${esc(e.from)}" data-to="${esc(e.to)}" data-key="${esc(`${pair}#${lane}`)}" aria-label="${esc(`${text}. Enter goes to ${e.to}.`)}"><title>${esc(text)}</title><path class="hit" d="${d}"/><path class="line" d="${d}" marker-end="url(#arrow-${onCycle ? 'cycle' : kind})"/></g>`,
      );
    }
    this.svgEdges.innerHTML = `${EDGE_DEFS}${edges.join('')}`;
    this.nodes.clear();
    for (const el of /** @type {NodeListOf<SVGGElement>} */ (this.svgNodes.querySelectorAll('.node'))) this.nodes.set(el.dataset.id, el);
    this.svgNodes.setAttribute('data-count', String(model.calls.length));
    this.svgNodes.setAttribute(
      'aria-label',
      `${model.calls.length} calls in ${columns.length} generations (Enter opens a call's details; arrow keys move between calls)`,
    );
    this.size();
    if (refocus?.node) this.focus(refocus.node);
    else if (refocus?.edge)
      /** @type {SVGGElement | null} */ (this.svgEdges.querySelector(`[data-key="${CSS.escape(refocus.edge)}"]`))?.focus();
  }

  /**
   * @param {RunModel} model
   * @param {Call} c
   * @param {Cycles} cycles
   */
  parts(model, c, cycles) {
    const r = model.reason(c);
    let note = '';
    const cycle = /** @type {{ cycle?: string[] } | undefined} */ (c.blockedBy?.details)?.cycle;
    if (cycles.members.has(c.id)) note = `on a cycle${cycle ? `: ${cycle.join('→')}` : ''}`;
    else if (c.status === 'blocked') {
      const on = r?.on ? model.call(r.on) : undefined;
      note =
        r?.code === 'awaiting_replan'
          ? `awaits a replan (${r.on} failed)`
          : on
            ? `waits on ${on.id} (${label(on.status)})`
            : (r?.code ?? 'blocked');
    } else if (c.status === 'pending' && r?.onAll) note = `waits on ${r.onAll.join(', ')}`;
    else if (c.status === 'ready') note = r?.waits ? `waiting for ${shortWait(r.waits[0])}` : 'waiting for a limit';
    else if (c.status === 'awaiting_review') note = 'needs a review';
    else if (c.status === 'failed' || c.status === 'cancelled') note = c.error?.code ?? '';
    else if (c.attempts > 1) note = `${c.attempts} attempts`;
    const aria = `${c.id}, tool ${c.tool}, ${label(c.status)}${r && c.status !== 'succeeded' ? `: ${r.text}` : ''}`;
    return { note, aria };
  }

  /**
   * @param {Call} c
   * @param {Cycles} cycles
   * @param {string | null} selected
   */
  cls(c, cycles, selected) {
    return `node s-${c.status}${this.compact ? ' compact' : ''}${cycles.members.has(c.id) ? ' cycle' : ''}${selected === c.id ? ' selected' : ''}`;
  }

  /**
   * @param {Call} c
   * @param {Cycles} cycles
   */
  line(c, cycles) {
    return `${cycles.members.has(c.id) ? '∞ ' : ''}${GLYPH[c.status] ?? '•'} ${cut(c.id, 16)} · ${label(c.status)}`;
  }

  /**
   * @param {RunModel} model
   * @param {Call} c
   * @param {Pos} p
   * @param {Cycles} cycles
   * @param {string | null} selected
   */
  nodeMarkup(model, c, p, cycles, selected) {
    const { note, aria } = this.parts(model, c, cycles);
    const H = /** @type {Layout} */ (this.layout).H;
    const head = `<g class="${this.cls(c, cycles, selected)}" data-id="${esc(c.id)}" data-status="${c.status}" tabindex="0" role="button" aria-label="${esc(aria)}" transform="translate(${p.x},${p.y})"><title>${esc(aria)}</title><rect class="ring" x="-5" y="-5" width="${W + 10}" height="${H + 10}" rx="9"/><rect class="box" width="${W}" height="${H}" rx="6"/><rect class="pat" width="${W}" height="${H}" rx="6"/>`;
    if (this.compact) return `${head}<text class="nline" x="8" y="19">${esc(this.line(c, cycles))}</text></g>`;
    return `${head}<text class="nid" x="10" y="18">${esc(cut(c.id, 22))}</text><text class="nst" x="10" y="35"><tspan class="glyph">${GLYPH[c.status] ?? '•'}</tspan> <tspan class="stt">${esc(label(c.status))}</tspan> · ${esc(cut(c.tool, 14))}</text><text class="note" x="10" y="50">${esc(cut(note, 30))}</text>${cycles.members.has(c.id) ? `<text class="cyc" x="${W - 8}" y="18" text-anchor="end">∞ cycle</text>` : ''}</g>`;
  }

  /**
   * @param {RunModel} model
   * @param {Call | undefined} c
   * @param {Cycles} cycles
   * @param {string | null} selected
   */
  update(model, c, cycles, selected) {
    const el = this.nodes.get(c?.id);
    if (!el || !c) return;
    const { note, aria } = this.parts(model, c, cycles);
    el.setAttribute('class', this.cls(c, cycles, selected));
    el.dataset.status = c.status;
    el.setAttribute('aria-label', aria);
    find(el, 'title', SVGTitleElement).textContent = aria;
    if (this.compact) {
      find(el, '.nline', SVGTextElement).textContent = this.line(c, cycles);
      return;
    }
    find(el, '.glyph', SVGTSpanElement).textContent = GLYPH[c.status] ?? '•';
    find(el, '.stt', SVGTSpanElement).textContent = label(c.status);
    find(el, '.note', SVGTextElement).textContent = cut(note, 30);
  }
}

// Patterns make statuses readable without colour: stripes = blocked, crosses = failed, dots = review.
const DEFS = `<defs>
<pattern id="pat-stripes" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="3" height="8" class="pat-ink"/></pattern>
<pattern id="pat-cross" width="9" height="9" patternUnits="userSpaceOnUse"><path d="M0,0 L9,9 M9,0 L0,9" class="pat-line"/></pattern>
<pattern id="pat-dots" width="7" height="7" patternUnits="userSpaceOnUse"><circle cx="3.5" cy="3.5" r="1.2" class="pat-ink"/></pattern>
<pattern id="pat-hlines" width="6" height="6" patternUnits="userSpaceOnUse"><path d="M0,3 L6,3" class="pat-line"/></pattern>
</defs>`;

const EDGE_DEFS = `<defs>${['data', 'conflict', 'policy', 'cycle']
  .map(
    (k) =>
      `<marker id="arrow-${k}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse" markerUnits="userSpaceOnUse"><path d="M0,0 L10,5 L0,10 z" class="arrow arrow-${k}"/></marker>`,
  )
  .join('')}</defs>`;
