// The run page's graph panel: the calls laid out by their edges (graph.js), a legend, and zoom.

import { find } from '../dom.js';
import { GraphView } from '../graph.js';
import { CALL_STATUSES, GLYPH, label } from '../util.js';

const GRAPH_LEGEND = `<div class="legend" aria-label="Legend">
  <ul class="legend-status">${CALL_STATUSES.map(
    (s) =>
      `<li><svg width="22" height="14" aria-hidden="true" class="sw s-${s}"><rect class="box" x="1" y="1" width="20" height="12" rx="3"/><rect class="pat" x="1" y="1" width="20" height="12" rx="3"/></svg><span aria-hidden="true">${GLYPH[s]}</span> ${label(s)}</li>`,
  ).join(
    '',
  )}<li><svg width="22" height="14" aria-hidden="true" class="sw cycle-sw"><rect class="box" x="1" y="1" width="20" height="12" rx="3"/></svg>∞ on a cycle</li></ul>
  <ul class="legend-edges">${['data', 'conflict', 'policy']
    .map(
      (k) =>
        `<li><svg width="34" height="10" aria-hidden="true" class="edge-sw k-${k}"><path class="line" d="M1,5 H33"/></svg> ${k}${k === 'data' ? ' (a reference)' : k === 'conflict' ? ' (shared resource)' : ' (after / requires)'}</li>`,
    )
    .join('')}</ul>
</div>`;

export const GRAPH_SECTION = `<section class="graph-section" aria-labelledby="gr-h">
            <div class="section-head"><h2 id="gr-h">Graph</h2>
              <div class="zoom" role="group" aria-label="Zoom"><button type="button" data-zoom="out" aria-label="Zoom out">−</button><output class="zoom-level">100%</output><button type="button" data-zoom="in" aria-label="Zoom in">+</button><button type="button" data-zoom="fit">Fit</button><button type="button" data-zoom="reset">100%</button></div>
            </div>
            ${GRAPH_LEGEND}
            <div class="graph"></div>
          </section>`;

export class GraphPanel {
  /**
   * `section`: the element of GRAPH_SECTION; `onOpen(callId)` when a call is opened from the graph.
   * @param {HTMLElement} section
   * @param {{ onOpen: (callId: string | undefined) => void }} options
   */
  constructor(section, { onOpen }) {
    this.view = new GraphView(find(section, '.graph'), { onOpen });
    find(section, '.zoom').addEventListener('click', (ev) => {
      const b = /** @type {HTMLButtonElement | null} */ (/** @type {Element} */ (ev.target).closest('button[data-zoom]'));
      if (!b) return;
      const z = b.dataset.zoom;
      if (z === 'fit') this.view.fit();
      else this.view.setZoom(z === 'reset' ? 1 : this.view.zoom * (z === 'in' ? 1.25 : 0.8));
      find(section, '.zoom-level', HTMLOutputElement).textContent = `${Math.round(this.view.zoom * 100)}%`;
    });
  }

  /**
   * Draws what changed in `model`; true when the graph was laid out again.
   * @param {import('../model.js').RunModel} model
   * @param {string | null} selected
   */
  render(model, selected) {
    return this.view.render(model, selected);
  }

  /** @param {string | null} callId */
  focus(callId) {
    this.view.focus(callId);
  }
}
