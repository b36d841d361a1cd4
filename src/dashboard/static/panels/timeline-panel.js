// The run page's timeline panel: every attempt on a time axis (timeline.js), a legend, and how long
// calls waited for a limit. It is drawn only while it is on screen (or about to be): for a big run it
// is a large SVG, and below the fold it would only slow the first paint.

import { find } from '../dom.js';
import { TimelineView, waits } from '../timeline.js';
import { fmtMs, plural } from '../util.js';

const TIMELINE_LEGEND = `<ul class="legend legend-tl" aria-label="Timeline legend">
  <li><svg width="26" height="12" aria-hidden="true"><rect class="bar wait" width="26" height="12"/></svg> waiting for a limit (ready → started)</li>
  <li><svg width="26" height="12" aria-hidden="true"><rect class="bar review" width="26" height="12"/></svg> awaiting review</li>
  <li><svg width="26" height="12" aria-hidden="true"><rect class="bar hook" width="26" height="12"/></svg> a hook deciding</li>
  <li><svg width="26" height="12" aria-hidden="true"><rect class="bar run o-running" width="26" height="12"/></svg> running</li>
  <li><svg width="26" height="12" aria-hidden="true"><rect class="bar run o-succeeded" width="26" height="12"/></svg> succeeded</li>
  <li><svg width="26" height="12" aria-hidden="true"><rect class="bar run o-failed" width="26" height="12"/></svg> failed / retried</li>
  <li><svg width="26" height="12" aria-hidden="true"><line class="backoff" x1="0" x2="26" y1="6" y2="6"/></svg> retry backoff</li>
</ul>`;

export const TIMELINE_SECTION = `<section class="timeline-section" aria-labelledby="tl-h">
            <h2 id="tl-h">Timeline</h2>
            <p class="tl-summary"></p>
            ${TIMELINE_LEGEND}
            <div class="timeline-wrap"></div>
          </section>`;

export class TimelinePanel {
  /**
   * `section`: the element of TIMELINE_SECTION; `onOpen(callId)` when a call is opened from the
   * timeline; `onResize()` when its width changed; `onShown()` when it comes on screen.
   * @param {HTMLElement} section
   * @param {{ onOpen: (callId: string | undefined) => void, onResize: () => void, onShown: () => void }} options
   */
  constructor(section, { onOpen, onResize, onShown }) {
    this.section = section;
    this.view = new TimelineView(find(section, '.timeline-wrap'), { onOpen, onResize });
    this.visible = false;
    this.observer = new IntersectionObserver(
      (entries) => {
        this.visible = entries.some((e) => e.isIntersecting);
        if (this.visible) onShown();
      },
      { rootMargin: '300px 0px' },
    );
    this.observer.observe(section);
  }

  /**
   * Draws the whole timeline at server time `now`, and the summary of waits above it.
   * @param {import('../model.js').RunModel} model
   * @param {number} now
   */
  render(model, now) {
    this.view.render(model, now);
    const w = waits(model);
    find(this.section, '.tl-summary').textContent = w.longest
      ? `${plural(w.count, 'attempt')} waited for a limit (ready → started), ${fmtMs(w.total)} in all; the longest: ${w.longest.id}, ${fmtMs(w.longest.ms)}.`
      : 'No call waited for a limit.';
  }

  destroy() {
    this.observer.disconnect();
  }
}
