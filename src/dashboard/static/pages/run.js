// A run (#/runs/<id>?call=<callId>): its header and actions, alerts, graph, timeline, and a side
// column with the selected call's details, the pending reviews and the calls that are not done. The
// page reads only the run's event stream (a finished run's events, then a live run's tail) into a
// RunModel, and draws what changed at most once per frame; each panel draws its own part.

import { api, ApiError, stream } from '../api.js';
import { hasOwners, ownerHtml } from '../cluster.js';
import { el, errorText, find, setHash } from '../dom.js';
import { RunModel } from '../model.js';
import { alertsHtml } from '../panels/alerts.js';
import { renderCallDetails } from '../panels/call-details.js';
import { GRAPH_SECTION, GraphPanel } from '../panels/graph-panel.js';
import { ReviewsPanel } from '../panels/reviews.js';
import { bindRunActions, showRunEnded } from '../panels/run-actions.js';
import { renderStuck } from '../panels/stuck.js';
import { TIMELINE_SECTION, TimelinePanel } from '../panels/timeline-panel.js';
import { announce, badge, CALL_STATUSES, ENDED_RUN, esc, fmtMs, fmtTime, frameScheduler, GLYPH, label, throttle } from '../util.js';

/** How often the run's owner is read again while the run is not over (ms). */
const OWNER_REFRESH_MS = 3000;

/** @typedef {import('../api.js').RunEvent} RunEvent */

export class RunPage {
  /**
   * @param {string} id  the run's
   * @param {URLSearchParams} params  the address's query (`call`: the call to show)
   */
  constructor(id, params) {
    this.id = id;
    this.model = new RunModel();
    this.selected = params.get('call');
    this.offset = Infinity;
    /**
     * When the first event came (performance.now()): the stored events are drawn once they are all in.
     * @type {number | undefined}
     */
    this.firstAt = undefined;
    this.schedule = frameScheduler(() => this.render());
    this.el = el(`<section class="page run-page">
      <nav class="crumbs" aria-label="Breadcrumb"><a href="#/">← All runs</a></nav>
      <header class="run-head">
        <div class="title-row"><h1 tabindex="-1">Run <code>${esc(id)}</code></h1><span class="run-status"></span>
          <div class="actions">
            <button type="button" class="cancel danger-outline" disabled>Cancel run…</button>
            <span class="confirm" hidden role="group" aria-label="Confirm cancel">Stop this run? Running calls are aborted.
              <button type="button" class="yes danger">Yes, cancel the run</button>
              <button type="button" class="no">Keep it running</button></span>
            <button type="button" class="download">Download recording</button>
          </div>
        </div>
        <dl class="meta"></dl>
        <p class="action-msg" role="status"></p>
      </header>
      <div class="alerts"></div>
      <div class="run-body">
        <div class="run-main">
          ${GRAPH_SECTION}
          ${TIMELINE_SECTION}
        </div>
        <div class="run-side">
          <aside class="details" aria-labelledby="dt-h" hidden></aside>
          <section class="reviews" aria-labelledby="rv-h" hidden><h2 id="rv-h">Awaiting review</h2><div class="review-list"></div></section>
          <section class="stuck" aria-labelledby="st-h" hidden><h2 id="st-h">Why calls are not done</h2><div class="stuck-body"></div></section>
        </div>
      </div>
    </section>`);
    const q = (/** @type {string} */ s) => find(this.el, s);
    this.graph = new GraphPanel(q('.graph-section'), { onOpen: (cid) => this.select(cid, true) });
    this.timeline = new TimelinePanel(q('.timeline-section'), {
      onOpen: (cid) => this.select(cid, true),
      onResize: () => {
        this.timelineDue = true;
        this.schedule();
      },
      onShown: () => {
        if (this.timelineDue) this.schedule();
      },
    });
    this.reviews = new ReviewsPanel(q('.reviews'), {
      runId: id,
      onDecided: (text) => (q('.action-msg').textContent = text),
      onShownOrHidden: () => this.layoutSide(),
    });
    this.refreshReviews = throttle(() => this.reviews.load(), 300);
    bindRunActions(q('.run-head'), id);
    // Buttons anywhere in the page that name a call open it.
    this.el.addEventListener('click', (ev) => {
      const b = /** @type {HTMLElement | null} */ (/** @type {Element} */ (ev.target).closest('[data-open]'));
      if (b) {
        ev.preventDefault();
        this.select(b.dataset.open, true);
      }
    });
    this.el.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape' && this.selected && q('.details').contains(/** @type {Node | null} */ (ev.target))) this.closeDetails();
    });
  }

  start() {
    document.title = `toolgraph · ${this.id}`;
    find(this.el, 'h1').focus({ preventScroll: true });
    // The run's events are all the page needs: a finished run's replay, then a live run's tail.
    this.events = stream(`/v1/runs/${encodeURIComponent(this.id)}/events`, {
      onEvent: ({ data }) => this.onEvent(/** @type {RunEvent | string} */ (data)),
      reconnect: () => !this.model.run || !ENDED_RUN.has(this.model.run.status),
      onState: (s, e) => {
        this.el.dataset.stream = s;
        if (s === 'error') this.failed(e);
        if (s === 'closed' || s === 'reconnecting') this.catchUp();
      },
    });
    this.reviews.load();
    this.followOwner();
    this.ticker = setInterval(() => {
      if (this.model.run && !ENDED_RUN.has(this.model.run.status)) {
        this.timelineDue = true;
        this.model.runChanged = true; // "running for …"
        this.schedule();
      }
    }, 1000);
  }

  /**
   * Several replicas: which one owns the run, read at once and every few seconds while the run is not
   * over (a takeover changes it without an event of its own).
   */
  async followOwner() {
    if (!(await hasOwners()) || this.destroyed) return;
    this.owners = true;
    const read = async () => {
      try {
        const run = /** @type {import('../api.js').Run} */ (await api(`/v1/runs/${encodeURIComponent(this.id)}`));
        if (this.destroyed) return;
        if (run.owner !== this.owner) {
          /** @type {string | null | undefined} */
          this.owner = run.owner;
          this.model.runChanged = true;
          this.schedule();
        }
        if (ENDED_RUN.has(run.status) && run.status !== 'needs_replan') return;
      } catch {
        // shown by the event stream; tried again below
      }
      if (!this.destroyed) this.ownerTimer = setTimeout(read, OWNER_REFRESH_MS);
    };
    this.owner = null;
    this.model.runChanged = true;
    this.schedule();
    await read();
  }

  /** @param {import('../api.js').ApiError | undefined} e */
  failed(e) {
    if (this.destroyed || this.model.run) return;
    find(this.el, '.run-body').hidden = true;
    find(this.el, '.actions').hidden = true;
    find(this.el, '.alerts').innerHTML = `<div class="alert alert-danger" role="alert">${
      e instanceof ApiError && e.status === 404
        ? `No run <code>${esc(this.id)}</code> (or it belongs to another tenant).`
        : `Could not load the run: ${esc(errorText(e))}`
    }</div>`;
  }

  destroy() {
    this.destroyed = true;
    this.events?.close();
    clearInterval(this.ticker);
    clearTimeout(this.ownerTimer);
    clearTimeout(this.timelineTimer);
    clearTimeout(this.settle);
    this.timeline.destroy();
    this.reviews.destroy();
  }

  serverNow() {
    return Number.isFinite(this.offset) ? Date.now() - this.offset : this.model.lastAt;
  }

  /** @param {RunEvent | string | undefined} e  a message's data: an event of this run, or something to ignore */
  onEvent(e) {
    if (!e || typeof e !== 'object' || e.runId !== this.id) return;
    const before = this.model.run?.status;
    this.model.apply(e);
    this.offset = Math.min(this.offset, Date.now() - Date.parse(e.at));
    if (e.type === 'call.awaiting_review' || e.type === 'review.decided' || e.type === 'run.completed') this.refreshReviews();
    if (e.type === 'run.completed' && before && before !== e.data.status)
      announce(`Run ${this.id} ended: ${label(/** @type {string} */ (e.data.status))}`);
    this.timelineDue = true;
    if (this.caughtUp) {
      this.schedule();
      return;
    }
    // The stored events come first, in a burst: draw once they are all in (the stream goes quiet
    // or closes), not piece by piece, however the bytes happen to be chunked.
    this.firstAt ??= performance.now();
    clearTimeout(this.settle);
    if (performance.now() - this.firstAt > 1500) this.catchUp();
    else this.settle = setTimeout(() => this.catchUp(), 120);
  }

  catchUp() {
    clearTimeout(this.settle);
    this.caughtUp = true;
    this.schedule();
  }

  /**
   * @param {string | null | undefined} id  the call to show, none when null
   * @param {boolean} focus  whether to move the focus to it
   */
  select(id, focus) {
    if (id && !this.model.call(id) && this.model.run) id = null;
    this.selected = id || null;
    const params = new URLSearchParams();
    if (this.selected) params.set('call', this.selected);
    setHash(`/runs/${encodeURIComponent(this.id)}`, params);
    this.detailsDirty = true;
    this.render();
    const panel = find(this.el, '.details');
    if (this.selected && focus) {
      /** @type {HTMLElement | null} */ (panel.querySelector('h2'))?.focus({ preventScroll: true });
      panel.scrollIntoView({ block: 'nearest', behavior: 'instant' });
    }
  }

  /** Closes the call details and puts the focus back on the call in the graph. */
  closeDetails() {
    const id = this.selected;
    this.select(null, false);
    this.graph.focus(id);
  }

  // -- rendering

  render() {
    if (this.destroyed || !this.model.run) return;
    const t0 = performance.now();
    this.renderFrame();
    // The cost of each frame's work, for anyone profiling the page (performance.getEntriesByName).
    performance.measure('toolgraph:render', { start: t0, end: performance.now() });
  }

  renderFrame() {
    const m = this.model;
    if (!m.run) return;
    if (m.runChanged) this.renderHead();
    const changed = m.changed.size > 0 || m.runChanged;
    const laidOut = this.graph.render(m, this.selected);
    if (changed) {
      this.renderCounts();
      renderStuck(find(this.el, '.stuck'), m, this.serverNow());
    }
    if (changed || this.detailsDirty) {
      renderCallDetails(find(this.el, '.details'), m, this.selected, {
        serverNow: () => this.serverNow(),
        onClose: () => this.closeDetails(),
      });
    }
    if (this.timelineDue && this.timeline.visible) {
      // The timeline is redrawn whole: at most 4 times a second (once a second for a big run), and
      // never in the frame that laid the graph out, so the graph shows first.
      const now = performance.now();
      const gap = m.calls.length > 200 ? 1000 : 250;
      const wait = laidOut ? 0 : ENDED_RUN.has(m.run.status) ? 0 : Math.max(0, (this.lastTimeline ?? -Infinity) + gap - now);
      if (!laidOut && wait === 0) {
        this.lastTimeline = now;
        this.timelineDue = false;
        this.timeline.render(m, this.serverNow());
      } else {
        clearTimeout(this.timelineTimer);
        this.timelineTimer = setTimeout(() => this.schedule(), wait);
      }
    }
    m.changed.clear();
    m.runChanged = false;
    this.detailsDirty = false;
    this.layoutSide();
    this.el.dataset.status = m.run.status;
    this.el.dataset.rendered = String(m.calls.length);
    this.el.dataset.timeline = this.timelineDue ? 'stale' : 'current';
  }

  /** The side column (details, reviews, stuck calls) shows only when it has something. */
  layoutSide() {
    const side = ['.details', '.reviews', '.stuck'].some((sel) => !find(this.el, sel).hidden);
    find(this.el, '.run-body').classList.toggle('has-side', side);
  }

  renderHead() {
    const m = this.model;
    const r = m.run;
    if (!r) return;
    find(this.el, '.run-status').innerHTML = badge(r.status);
    const tags = Object.entries(r.tags ?? {})
      .map(([k, v]) => `<span class="tag">${esc(k)}:${esc(v)}</span>`)
      .join(' ');
    const dur = (r.endedAt ? Date.parse(r.endedAt) : this.serverNow()) - Date.parse(r.createdAt);
    find(this.el, '.meta').innerHTML = `
      <div><dt>Tenant</dt><dd>${esc(r.tenant)}</dd></div>
      <div><dt>Failure mode</dt><dd>${esc(label(r.failure ?? ''))}</dd></div>
      ${priorityHtml(r)}
      <div><dt>Created</dt><dd><time datetime="${esc(r.createdAt)}">${esc(fmtTime(r.createdAt))}</time></dd></div>
      <div><dt>${r.endedAt ? 'Took' : 'Running for'}</dt><dd>${fmtMs(dur)}</dd></div>
      ${this.owners ? `<div class="owner-meta"><dt>Replica</dt><dd>${ownerHtml(ENDED_RUN.has(r.status) && r.status !== 'needs_replan' ? null : this.owner)}</dd></div>` : ''}
      ${tags ? `<div><dt>Tags</dt><dd>${tags}</dd></div>` : ''}
      <div class="calls-meta"><dt>Calls</dt><dd class="call-counts"></dd></div>`;
    showRunEnded(find(this.el, '.run-head'), ENDED_RUN.has(r.status));
    find(this.el, '.alerts').innerHTML = alertsHtml(m);
  }

  renderCounts() {
    const cc = this.model.counts();
    const dd = this.el.querySelector('.call-counts');
    if (!dd) return;
    dd.innerHTML = `${this.model.calls.length}: ${CALL_STATUSES.filter((s) => cc[s])
      .map((s) => `<span class="mini st-${s}"><span aria-hidden="true">${GLYPH[s]}</span> ${cc[s]} ${label(s)}</span>`)
      .join(' ')}`;
  }
}

/**
 * The run's priority (1 most urgent … 5; DESIGN §4), when the server gives one.
 * @param {object} r  the run
 */
export function priorityHtml(r) {
  const p = /** @type {{ priority?: unknown }} */ (r).priority;
  if (typeof p !== 'number') return '';
  const word = p === 1 ? 'most urgent' : p === 5 ? 'background' : p === 3 ? 'default' : p < 3 ? 'urgent' : 'low';
  return `<div class="priority-meta"><dt>Priority</dt><dd>${esc(String(p))} <span class="muted">(${esc(word)})</span></dd></div>`;
}
