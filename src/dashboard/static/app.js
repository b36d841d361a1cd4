// The toolgraph operators' dashboard: a runs list that updates live, and a run view (graph, timeline,
// call details, reviews, cancel, recording). Hash routes: #/ (list, filters in the query) and
// #/runs/<id>?call=<callId>. No framework: each page renders HTML strings at most once per frame.

import { api, ApiError, onUnauthorized, session, stream } from './api.js';
import { GraphView } from './graph.js';
import { RunModel } from './model.js';
import { TimelineView, waits } from './timeline.js';
import {
  ago,
  announce,
  badge,
  CALL_STATUSES,
  ENDED_RUN,
  esc,
  fmtMs,
  fmtTime,
  frameScheduler,
  GLYPH,
  json,
  label,
  plural,
  RUN_STATUSES,
  throttle,
} from './util.js';

const main = document.getElementById('main');
let page = null;

// ---- the operator key ------------------------------------------------------------------------

const dialog = document.getElementById('login');
let loginWaiters = [];

onUnauthorized(
  (message) =>
    new Promise((resolve) => {
      loginWaiters.push(resolve);
      dialog.querySelector('.login-why').textContent = session.key ? 'That key was not accepted.' : 'This server needs an operator key.';
      dialog.querySelector('.login-error').textContent = session.key ? message : '';
      session.clear();
      updateWho();
      if (!dialog.open) dialog.showModal();
      dialog.querySelector('#login-key').focus();
    }),
);

dialog.addEventListener('cancel', (ev) => ev.preventDefault());
dialog.querySelector('form').addEventListener('submit', (ev) => {
  const input = dialog.querySelector('#login-key');
  const key = input.value.trim();
  if (!key) {
    ev.preventDefault();
    return;
  }
  session.set(key);
  input.value = '';
  updateWho();
  const waiting = loginWaiters;
  loginWaiters = [];
  for (const w of waiting) w();
});

function updateWho() {
  document.querySelector('.who').hidden = !session.key;
}

document.querySelector('.forget').addEventListener('click', () => {
  session.clear();
  updateWho();
  announce('The key is forgotten');
  route(true);
});

// ---- routing ---------------------------------------------------------------------------------

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  return { path, params };
}

function setHash(path, params) {
  const qs = params.toString();
  history.replaceState(null, '', `#${path}${qs ? `?${qs}` : ''}`);
}

function route(force = false) {
  const { path, params } = parseHash();
  const m = /^\/runs\/([^/?]+)$/.exec(path);
  if (m) {
    const id = decodeURIComponent(m[1]);
    if (!force && page instanceof RunPage && page.id === id) {
      page.select(params.get('call'), false);
      return;
    }
    mount(new RunPage(id, params));
  } else {
    mount(new ListPage(params));
  }
  for (const a of document.querySelectorAll('[data-nav]')) {
    const on = m ? false : a.dataset.nav === (params.get('attention') === '1' ? 'attention' : 'runs');
    if (on) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

function mount(next) {
  page?.destroy();
  page = next;
  main.innerHTML = '';
  main.append(next.el);
  next.start();
}

window.addEventListener('hashchange', () => route());

// ---- shared bits -----------------------------------------------------------------------------

const ATTENTION = ['deadlocked', 'needs_replan', 'failed', 'partial'];

function summarize(view) {
  const callCounts = {};
  for (const s of CALL_STATUSES) callCounts[s] = 0;
  for (const c of view.calls) callCounts[c.status]++;
  return {
    id: view.id,
    tenant: view.tenant,
    status: view.status,
    failure: view.failure,
    tags: view.tags,
    createdAt: view.createdAt,
    endedAt: view.endedAt,
    callCount: view.calls.length,
    callCounts,
    diagnostics: view.diagnostics.map((d) => d.code),
  };
}

function el(html) {
  const t = document.createElement('template');
  t.innerHTML = html.trim();
  return t.content.firstElementChild;
}

function errorText(e) {
  if (e instanceof ApiError) return `${e.message} (${e.status} ${e.code})`;
  return e?.message ?? String(e);
}

async function mapLimit(items, n, fn) {
  const out = [];
  let i = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (i < items.length) {
        const k = i++;
        out[k] = await fn(items[k]).catch(() => undefined);
      }
    }),
  );
  return out;
}

// ---- the runs list ---------------------------------------------------------------------------

class ListPage {
  constructor(params) {
    this.filters = {
      status: params.get('status') ?? '',
      tenant: params.get('tenant') ?? '',
      tag: params.getAll('tag').join(' '),
      attention: params.get('attention') === '1',
    };
    this.rows = new Map();
    /** Summaries from the live stream, with when they came: fresher than a page fetched before. */
    this.streamed = new Map();
    this.visible = new Set();
    this.fresh = new Map();
    this.reviewRuns = new Map();
    this.counts = null;
    this.nextCursor = null;
    this.schedule = frameScheduler(() => this.render());
    this.el = el(`<section class="page list-page">
      <div class="page-head"><h1 tabindex="-1">Runs</h1><span class="live" data-state="connecting" role="status">Connecting…</span></div>
      <div class="counts" role="group" aria-label="Runs per status (choose one to filter)"></div>
      <form class="filters" role="search" aria-label="Filter runs">
        <button type="button" class="attention-toggle" aria-pressed="false"><span aria-hidden="true">⚠</span> Needs attention</button>
        <label>Status <select name="status"><option value="">any</option>${RUN_STATUSES.map((s) => `<option value="${s}">${label(s)}</option>`).join('')}</select></label>
        <label>Tenant <input name="tenant" autocomplete="off" spellcheck="false" placeholder="any" size="12"></label>
        <label>Tag <input name="tag" autocomplete="off" spellcheck="false" placeholder="key:value" size="16"></label>
        <button type="submit">Apply</button>
        <button type="button" class="clear">Clear</button>
        <p class="form-error" role="alert"></p>
      </form>
      <p class="attention-help" hidden>Runs that need an operator: deadlocked, needs replan, failed or partial, with blocked or failed calls, or with calls awaiting review.</p>
      <div class="table-wrap"><table class="runs">
        <caption class="sr-only">Runs, newest first</caption>
        <thead><tr><th scope="col">Run</th><th scope="col">Status</th><th scope="col">Attention</th><th scope="col">Calls</th><th scope="col" class="c-tenant">Tenant</th><th scope="col" class="c-tags">Tags</th><th scope="col" class="c-created">Created</th><th scope="col" class="c-dur">Duration</th></tr></thead>
        <tbody></tbody>
      </table></div>
      <p class="empty" hidden>No runs match these filters.</p>
      <p class="list-error" role="alert" hidden></p>
      <button type="button" class="more" hidden>Load more</button>
    </section>`);
    const form = this.el.querySelector('.filters');
    form.status.value = this.filters.status;
    form.tenant.value = this.filters.tenant;
    form.tag.value = this.filters.tag;
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.apply({ status: form.status.value, tenant: form.tenant.value.trim(), tag: form.tag.value.trim() });
    });
    form.status.addEventListener('change', () => this.apply({ status: form.status.value }));
    form.querySelector('.clear').addEventListener('click', () => {
      form.status.value = '';
      form.tenant.value = '';
      form.tag.value = '';
      this.apply({ status: '', tenant: '', tag: '', attention: false });
    });
    form.querySelector('.attention-toggle').addEventListener('click', () => this.apply({ attention: !this.filters.attention }));
    this.el.querySelector('.counts').addEventListener('click', (ev) => {
      const b = ev.target.closest('button[data-status]');
      if (!b) return;
      const s = b.dataset.status;
      const next = this.filters.status === s ? '' : s;
      form.status.value = next;
      this.apply({ status: next, attention: false });
    });
    this.el.querySelector('.more').addEventListener('click', () => this.load(true));
    this.el.querySelector('tbody').addEventListener('click', (ev) => {
      if (ev.target.closest('a')) return;
      const tr = ev.target.closest('tr[data-id]');
      if (tr) location.hash = `#/runs/${encodeURIComponent(tr.dataset.id)}`;
    });
  }

  start() {
    document.title = 'toolgraph · runs';
    this.el.querySelector('h1').focus({ preventScroll: true });
    this.connect();
    this.load(false);
    this.ticker = setInterval(() => this.schedule(), 15_000);
  }

  destroy() {
    this.live?.close();
    this.loading?.abort();
    clearInterval(this.ticker);
    this.destroyed = true;
  }

  tags() {
    return this.filters.tag.split(/[\s,]+/).filter(Boolean);
  }

  apply(change) {
    const err = this.el.querySelector('.form-error');
    const next = { ...this.filters, ...change };
    const bad = next.tag.split(/[\s,]+/).filter(Boolean).find((t) => !/^[^:]+:.*$/.test(t));
    if (bad) {
      err.textContent = `A tag filter is key:value, got "${bad}"`;
      return;
    }
    if (next.tenant && !/^[A-Za-z0-9_.:-]{1,64}$/.test(next.tenant)) {
      err.textContent = 'A tenant is 1–64 characters of A-Z a-z 0-9 _ . : -';
      return;
    }
    err.textContent = '';
    const tenantChanged = next.tenant !== this.filters.tenant;
    this.filters = next;
    const params = new URLSearchParams();
    if (next.status) params.set('status', next.status);
    if (next.tenant) params.set('tenant', next.tenant);
    for (const t of this.tags()) params.append('tag', t);
    if (next.attention) params.set('attention', '1');
    setHash('/', params);
    for (const a of document.querySelectorAll('[data-nav]')) {
      if (a.dataset.nav === (next.attention ? 'attention' : 'runs')) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    if (tenantChanged) this.connect();
    this.load(false);
  }

  query(statuses, limit) {
    const qs = new URLSearchParams();
    for (const s of statuses) qs.append('status', s);
    if (this.filters.tenant) qs.set('tenant', this.filters.tenant);
    for (const t of this.tags()) qs.append('tag', t);
    qs.set('limit', String(limit));
    return qs;
  }

  async load(more) {
    this.loading?.abort();
    const ac = new AbortController();
    this.loading = ac;
    const errEl = this.el.querySelector('.list-error');
    const asked = performance.now();
    this.el.setAttribute('aria-busy', 'true');
    try {
      const reviews = api('/v1/reviews?status=pending', { signal: ac.signal });
      let items;
      let cursor = null;
      if (this.filters.attention) {
        const wanted = this.filters.status ? [this.filters.status] : ATTENTION;
        const ended = wanted.filter((s) => ATTENTION.includes(s));
        const qs = this.query(ended, 100);
        if (more && this.nextCursor) qs.set('cursor', this.nextCursor);
        const [page1, running] = await Promise.all([
          ended.length ? api(`/v1/runs?${qs}`, { signal: ac.signal }) : { items: [], nextCursor: null },
          !more && (!this.filters.status || this.filters.status === 'running') ? api(`/v1/runs?${this.query(['running', 'queued'], 50)}`, { signal: ac.signal }) : { items: [] },
        ]);
        const rv = await reviews;
        this.setReviews(rv.items);
        // A live run needs attention when a call is blocked, failed or awaiting review, and an ended
        // one is worth a word on why (a cycle, how many calls are blocked): read their calls. The
        // list's items do not carry per-status call counts.
        const read = [...running.items, ...page1.items.slice(0, 50)];
        const views = await mapLimit(read, 6, (r) => api(`/v1/runs/${encodeURIComponent(r.id)}`, { signal: ac.signal }).then(summarize));
        const byId = new Map(views.filter(Boolean).map((v) => [v.id, v]));
        items = [...page1.items, ...running.items].map((r) => byId.get(r.id) ?? r);
        cursor = page1.nextCursor;
      } else {
        const qs = this.query(this.filters.status ? [this.filters.status] : [], 50);
        if (more && this.nextCursor) qs.set('cursor', this.nextCursor);
        const res = await api(`/v1/runs?${qs}`, { signal: ac.signal });
        this.setReviews((await reviews).items);
        items = res.items;
        cursor = res.nextCursor;
      }
      if (this.destroyed || ac.signal.aborted) return;
      if (!more) this.visible.clear();
      for (const r of items) {
        const live = this.streamed.get(r.id);
        const row = live && live.at >= asked ? { ...r, ...live.summary } : { ...this.rows.get(r.id), ...r };
        this.rows.set(r.id, row);
        if (this.matches(row)) this.visible.add(r.id);
      }
      this.nextCursor = cursor;
      errEl.hidden = true;
    } catch (e) {
      if (e?.name === 'AbortError') return;
      errEl.hidden = false;
      errEl.textContent = `Could not load runs: ${errorText(e)}`;
    } finally {
      if (this.loading === ac) this.el.removeAttribute('aria-busy');
    }
    this.loaded = true;
    this.schedule();
  }

  setReviews(items) {
    this.reviewRuns.clear();
    for (const r of items) this.reviewRuns.set(r.runId, (this.reviewRuns.get(r.runId) ?? 0) + 1);
  }

  connect() {
    this.live?.close();
    const state = this.el.querySelector('.live');
    const qs = this.filters.tenant ? `?tenant=${encodeURIComponent(this.filters.tenant)}` : '';
    this.live = stream(`/v1/stream${qs}`, {
      onEvent: ({ event, data }) => {
        if (event === 'counts') {
          this.counts = data.counts;
          this.schedule();
        } else if (event === 'run') this.upsert(data);
      },
      onState: (s, e) => {
        state.dataset.state = s;
        state.textContent = s === 'open' ? 'Live' : s === 'reconnecting' ? 'Reconnecting…' : s === 'error' ? `Live updates off: ${errorText(e)}` : 'Live updates off';
        if (s === 'open' && this.loaded) this.load(false);
      },
    });
  }

  upsert(s) {
    this.streamed.set(s.id, { at: performance.now(), summary: s });
    const row = { ...this.rows.get(s.id), ...s };
    this.rows.set(s.id, row);
    if (s.callCounts) {
      if (s.callCounts.awaiting_review > 0) this.reviewRuns.set(s.id, s.callCounts.awaiting_review);
      else this.reviewRuns.delete(s.id);
    }
    if (this.matches(row)) {
      if (!this.visible.has(s.id)) {
        this.visible.add(s.id);
        this.fresh.set(s.id, Date.now());
        setTimeout(() => {
          this.fresh.delete(s.id);
          this.schedule();
        }, 2500);
        if (s.status === 'queued' || s.status === 'running') announce(`New run ${s.id}`);
      }
    } else this.visible.delete(s.id);
    this.schedule();
  }

  attentionReasons(r) {
    const out = [];
    const cc = r.callCounts;
    if (r.status === 'deadlocked' || r.diagnostics?.includes('cycle')) out.push(['deadlocked', r.diagnostics?.includes('cycle') ? 'cycle' : 'deadlock']);
    if (r.status === 'needs_replan') out.push(['needs_replan', 'needs replan']);
    if (cc?.blocked) out.push(['blocked', `${cc.blocked} blocked`]);
    const reviews = cc ? cc.awaiting_review : this.reviewRuns.get(r.id);
    if (reviews) out.push(['awaiting_review', `${reviews} awaiting review`]);
    if (cc?.failed) out.push(['failed', `${cc.failed} failed`]);
    else if (!cc && (r.status === 'failed' || r.status === 'partial')) out.push([r.status, r.status === 'failed' ? 'failed' : 'some calls failed or blocked']);
    return out;
  }

  matches(r) {
    const f = this.filters;
    if (f.status && r.status !== f.status) return false;
    if (f.tenant && r.tenant !== f.tenant) return false;
    for (const t of this.tags()) {
      const i = t.indexOf(':');
      if ((r.tags ?? {})[t.slice(0, i)] !== t.slice(i + 1)) return false;
    }
    if (f.attention && !ATTENTION.includes(r.status) && this.attentionReasons(r).length === 0) return false;
    return true;
  }

  render() {
    if (this.destroyed) return;
    const f = this.filters;
    this.el.querySelector('.attention-toggle').setAttribute('aria-pressed', String(f.attention));
    this.el.querySelector('.attention-help').hidden = !f.attention;
    this.el.querySelector('h1').textContent = f.attention ? 'Runs that need attention' : 'Runs';
    if (this.counts) {
      const total = Object.values(this.counts).reduce((a, b) => a + b, 0);
      this.el.querySelector('.counts').innerHTML =
        `<span class="count-total">${plural(total, 'run')}${this.filters.tenant ? ` of ${esc(this.filters.tenant)}` : ''}</span>` +
        RUN_STATUSES.map((s) => {
          const n = this.counts[s] ?? 0;
          return `<button type="button" class="chip st-${s}${n ? '' : ' zero'}" data-status="${s}" aria-pressed="${f.status === s}"><span aria-hidden="true">${GLYPH[s]}</span> ${label(s)} <b>${n}</b></button>`;
        }).join('');
    }
    const now = Date.now();
    const ids = [...this.visible].map((id) => this.rows.get(id)).filter(Boolean);
    ids.sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
    const html = ids.slice(0, 500).map((r) => {
      const reasons = this.attentionReasons(r)
        .map(([s, text]) => `<span class="why st-${s}"><span aria-hidden="true">${GLYPH[s] ?? '•'}</span> ${esc(text)}</span>`)
        .join(' ');
      const cc = r.callCounts;
      const breakdown = cc
        ? CALL_STATUSES.filter((s) => cc[s] && s !== 'succeeded')
            .map((s) => `${cc[s]} ${label(s)}`)
            .join(' · ')
        : '';
      const tags = Object.entries(r.tags ?? {})
        .map(([k, v]) => `<span class="tag">${esc(k)}:${esc(v)}</span>`)
        .join(' ');
      const end = r.endedAt ? Date.parse(r.endedAt) : now;
      return `<tr data-id="${esc(r.id)}" data-status="${esc(r.status)}"${this.fresh.has(r.id) ? ' class="fresh"' : ''}>
        <th scope="row"><a href="#/runs/${encodeURIComponent(r.id)}"><code>${esc(r.id)}</code></a></th>
        <td>${badge(r.status)}</td>
        <td class="c-why">${reasons || '<span class="muted">–</span>'}</td>
        <td class="c-calls">${r.callCount}${breakdown ? `<div class="muted small">${esc(breakdown)}</div>` : ''}</td>
        <td class="c-tenant">${esc(r.tenant)}</td>
        <td class="c-tags">${tags}</td>
        <td class="c-created"><time datetime="${esc(r.createdAt)}" title="${esc(fmtTime(r.createdAt))}">${esc(ago(r.createdAt, now))}</time></td>
        <td class="c-dur">${r.endedAt ? fmtMs(end - Date.parse(r.createdAt)) : `<span class="muted">${fmtMs(end - Date.parse(r.createdAt))} so far</span>`}</td>
      </tr>`;
    });
    this.el.querySelector('tbody').innerHTML = html.join('');
    this.el.querySelector('.empty').hidden = !this.loaded || ids.length > 0;
    this.el.querySelector('.more').hidden = !this.nextCursor;
  }
}

// ---- a run -----------------------------------------------------------------------------------

class RunPage {
  constructor(id, params) {
    this.id = id;
    this.model = new RunModel();
    this.selected = params.get('call');
    this.reviews = [];
    this.offset = Infinity;
    this.schedule = frameScheduler(() => this.render());
    this.refreshReviews = throttle(() => this.loadReviews(), 300);
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
          <section class="graph-section" aria-labelledby="gr-h">
            <div class="section-head"><h2 id="gr-h">Graph</h2>
              <div class="zoom" role="group" aria-label="Zoom"><button type="button" data-zoom="out" aria-label="Zoom out">−</button><output class="zoom-level">100%</output><button type="button" data-zoom="in" aria-label="Zoom in">+</button><button type="button" data-zoom="fit">Fit</button><button type="button" data-zoom="reset">100%</button></div>
            </div>
            ${GRAPH_LEGEND}
            <div class="graph"></div>
          </section>
          <section class="timeline-section" aria-labelledby="tl-h">
            <h2 id="tl-h">Timeline</h2>
            <p class="tl-summary"></p>
            ${TIMELINE_LEGEND}
            <div class="timeline-wrap"></div>
          </section>
        </div>
        <div class="run-side">
          <aside class="details" aria-labelledby="dt-h" hidden></aside>
          <section class="reviews" aria-labelledby="rv-h" hidden><h2 id="rv-h">Awaiting review</h2><div class="review-list"></div></section>
          <section class="stuck" aria-labelledby="st-h" hidden><h2 id="st-h">Why calls are not done</h2><div class="stuck-body"></div></section>
        </div>
      </div>
    </section>`);
    this.graph = new GraphView(this.el.querySelector('.graph'), { onOpen: (cid) => this.select(cid, true) });
    this.timeline = new TimelineView(this.el.querySelector('.timeline-wrap'), {
      onOpen: (cid) => this.select(cid, true),
      onResize: () => {
        this.timelineDue = true;
        this.schedule();
      },
    });
    // The timeline is drawn only while it is on screen (or about to be): for a big run it is a
    // large SVG, and below the fold it would only slow the first paint.
    this.timelineVisible = false;
    this.observer = new IntersectionObserver(
      (entries) => {
        this.timelineVisible = entries.some((e) => e.isIntersecting);
        if (this.timelineVisible && this.timelineDue) this.schedule();
      },
      { rootMargin: '300px 0px' },
    );
    this.observer.observe(this.el.querySelector('.timeline-section'));
    this.bind();
  }

  bind() {
    const q = (s) => this.el.querySelector(s);
    q('.cancel').addEventListener('click', () => {
      q('.confirm').hidden = false;
      q('.cancel').hidden = true;
      q('.confirm .no').focus();
    });
    q('.confirm .no').addEventListener('click', () => {
      q('.confirm').hidden = true;
      q('.cancel').hidden = false;
      q('.cancel').focus();
    });
    q('.confirm .yes').addEventListener('click', () => this.cancel());
    q('.download').addEventListener('click', () => this.download());
    q('.zoom').addEventListener('click', (ev) => {
      const b = ev.target.closest('button[data-zoom]');
      if (!b) return;
      const z = b.dataset.zoom;
      if (z === 'fit') this.graph.fit();
      else this.graph.setZoom(z === 'reset' ? 1 : this.graph.zoom * (z === 'in' ? 1.25 : 0.8));
      q('.zoom-level').textContent = `${Math.round(this.graph.zoom * 100)}%`;
    });
    // Buttons anywhere in the page that name a call open it.
    this.el.addEventListener('click', (ev) => {
      const b = ev.target.closest('[data-open]');
      if (b) {
        ev.preventDefault();
        this.select(b.dataset.open, true);
      }
    });
    this.el.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape' && this.selected && this.el.querySelector('.details').contains(ev.target)) {
        const id = this.selected;
        this.select(null, false);
        this.graph.focus(id);
      }
    });
    q('.review-list').addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.decide(ev.target, ev.submitter?.value ?? 'approve');
    });
  }

  start() {
    document.title = `toolgraph · ${this.id}`;
    this.el.querySelector('h1').focus({ preventScroll: true });
    // The run's events are all the page needs: a finished run's replay, then a live run's tail.
    this.events = stream(`/v1/runs/${encodeURIComponent(this.id)}/events`, {
      onEvent: ({ data }) => this.onEvent(data),
      reconnect: () => !this.model.run || !ENDED_RUN.has(this.model.run.status),
      onState: (s, e) => {
        this.el.dataset.stream = s;
        if (s === 'error') this.failed(e);
        if (s === 'closed' || s === 'reconnecting') this.catchUp();
      },
    });
    this.loadReviews();
    this.ticker = setInterval(() => {
      if (this.model.run && !ENDED_RUN.has(this.model.run.status)) {
        this.timelineDue = true;
        this.model.runChanged = true; // "running for …"
        this.schedule();
      }
    }, 1000);
  }

  failed(e) {
    if (this.destroyed || this.model.run) return;
    this.el.querySelector('.run-body').hidden = true;
    this.el.querySelector('.actions').hidden = true;
    this.el.querySelector('.alerts').innerHTML = `<div class="alert alert-danger" role="alert">${
      e instanceof ApiError && e.status === 404 ? `No run <code>${esc(this.id)}</code> (or it belongs to another tenant).` : `Could not load the run: ${esc(errorText(e))}`
    }</div>`;
  }

  destroy() {
    this.destroyed = true;
    this.events?.close();
    clearInterval(this.ticker);
    clearTimeout(this.timelineTimer);
    clearTimeout(this.settle);
    this.observer.disconnect();
  }

  serverNow() {
    return Number.isFinite(this.offset) ? Date.now() - this.offset : this.model.lastAt;
  }

  onEvent(e) {
    if (!e || typeof e !== 'object' || e.runId !== this.id) return;
    const before = this.model.run?.status;
    this.model.apply(e);
    this.offset = Math.min(this.offset, Date.now() - Date.parse(e.at));
    if (e.type === 'call.awaiting_review' || e.type === 'review.decided' || e.type === 'run.completed') this.refreshReviews();
    if (e.type === 'run.completed' && before && before !== e.data.status) announce(`Run ${this.id} ended: ${label(e.data.status)}`);
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

  async loadReviews() {
    try {
      const res = await api(`/v1/reviews?status=pending&runId=${encodeURIComponent(this.id)}`);
      if (this.destroyed) return;
      this.reviews = res.items;
      this.renderReviews();
    } catch {
      /* shown through the run's calls anyway */
    }
  }

  select(id, focus) {
    if (id && !this.model.call(id) && this.model.run) id = null;
    this.selected = id || null;
    const params = new URLSearchParams();
    if (this.selected) params.set('call', this.selected);
    setHash(`/runs/${encodeURIComponent(this.id)}`, params);
    this.detailsDirty = true;
    this.render();
    const panel = this.el.querySelector('.details');
    if (this.selected && focus) {
      panel.querySelector('h2')?.focus({ preventScroll: true });
      panel.scrollIntoView({ block: 'nearest', behavior: 'instant' });
    }
  }

  async cancel() {
    const msg = this.el.querySelector('.action-msg');
    const yes = this.el.querySelector('.confirm .yes');
    yes.disabled = true;
    try {
      await api(`/v1/runs/${encodeURIComponent(this.id)}/cancel`, { method: 'POST' });
      msg.textContent = 'Cancel requested: nothing new starts, running calls are aborted.';
    } catch (e) {
      msg.textContent = `Could not cancel: ${errorText(e)}`;
    } finally {
      yes.disabled = false;
      this.el.querySelector('.confirm').hidden = true;
      this.el.querySelector('.cancel').hidden = false;
    }
  }

  async download() {
    const msg = this.el.querySelector('.action-msg');
    try {
      const blob = await api(`/v1/runs/${encodeURIComponent(this.id)}/recording`, { as: 'blob' });
      const url = URL.createObjectURL(new Blob([blob], { type: 'application/json' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = `${this.id}.recording.json`;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      msg.textContent = `Downloaded ${this.id}.recording.json`;
    } catch (e) {
      msg.textContent = `Could not download the recording: ${errorText(e)}`;
    }
  }

  async decide(form, decision) {
    const msg = form.querySelector('.msg');
    const body = { decision };
    const comment = form.comment.value.trim();
    if (comment) body.comment = comment;
    if (decision === 'edit') {
      try {
        body.args = JSON.parse(form.args.value);
      } catch (e) {
        msg.textContent = `The args are not valid JSON: ${e.message}`;
        form.args.focus();
        return;
      }
      if (!body.args || typeof body.args !== 'object' || Array.isArray(body.args)) {
        msg.textContent = 'The args must be a JSON object.';
        form.args.focus();
        return;
      }
    }
    for (const b of form.querySelectorAll('button')) b.disabled = true;
    msg.textContent = '';
    try {
      await api(`/v1/reviews/${encodeURIComponent(form.dataset.review)}`, { method: 'POST', body });
      const word = decision === 'reject' ? 'Rejected' : decision === 'edit' ? 'Approved with edited args:' : 'Approved';
      announce(`${word} ${form.dataset.call}`);
      this.el.querySelector('.action-msg').textContent = `${word} ${form.dataset.call}.`;
      this.reviews = this.reviews.filter((r) => r.id !== form.dataset.review);
      this.renderReviews();
      this.loadReviews();
    } catch (e) {
      msg.textContent = errorText(e);
      for (const b of form.querySelectorAll('button')) b.disabled = false;
    }
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
    if (m.runChanged) this.renderHead();
    const changed = m.changed.size > 0 || m.runChanged;
    const laidOut = this.graph.render(m, this.selected);
    if (changed) {
      this.renderCounts();
      this.renderStuck();
    }
    if (changed || this.detailsDirty) this.renderDetails();
    if (this.timelineDue && this.timelineVisible) {
      // The timeline is redrawn whole: at most 4 times a second (once a second for a big run), and
      // never in the frame that laid the graph out, so the graph shows first.
      const now = performance.now();
      const gap = m.calls.length > 200 ? 1000 : 250;
      const wait = laidOut ? 0 : ENDED_RUN.has(m.run.status) ? 0 : Math.max(0, (this.lastTimeline ?? -Infinity) + gap - now);
      if (!laidOut && wait === 0) {
        this.lastTimeline = now;
        this.timelineDue = false;
        this.renderTimeline();
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
    const side = ['.details', '.reviews', '.stuck'].some((sel) => !this.el.querySelector(sel).hidden);
    this.el.querySelector('.run-body').classList.toggle('has-side', side);
  }

  renderHead() {
    const m = this.model;
    const r = m.run;
    this.el.querySelector('.run-status').innerHTML = badge(r.status);
    const tags = Object.entries(r.tags ?? {})
      .map(([k, v]) => `<span class="tag">${esc(k)}:${esc(v)}</span>`)
      .join(' ');
    const dur = (r.endedAt ? Date.parse(r.endedAt) : this.serverNow()) - Date.parse(r.createdAt);
    this.el.querySelector('.meta').innerHTML = `
      <div><dt>Tenant</dt><dd>${esc(r.tenant)}</dd></div>
      <div><dt>Failure mode</dt><dd>${esc(label(r.failure ?? ''))}</dd></div>
      <div><dt>Created</dt><dd><time datetime="${esc(r.createdAt)}">${esc(fmtTime(r.createdAt))}</time></dd></div>
      <div><dt>${r.endedAt ? 'Took' : 'Running for'}</dt><dd>${fmtMs(dur)}</dd></div>
      ${tags ? `<div><dt>Tags</dt><dd>${tags}</dd></div>` : ''}
      <div class="calls-meta"><dt>Calls</dt><dd class="call-counts"></dd></div>`;
    const ended = ENDED_RUN.has(r.status);
    this.el.querySelector('.cancel').disabled = ended;
    if (ended) this.el.querySelector('.confirm').hidden = true;
    if (ended) this.el.querySelector('.cancel').hidden = false;
    this.renderAlerts();
  }

  renderCounts() {
    const cc = this.model.counts();
    const dd = this.el.querySelector('.call-counts');
    if (!dd) return;
    dd.innerHTML = `${this.model.calls.length}: ${CALL_STATUSES.filter((s) => cc[s])
      .map((s) => `<span class="mini st-${s}"><span aria-hidden="true">${GLYPH[s]}</span> ${cc[s]} ${label(s)}</span>`)
      .join(' ')}`;
  }

  renderAlerts() {
    const m = this.model;
    const out = [];
    const { list } = m.cycles();
    const callBtn = (id) => `<button type="button" class="linklike" data-open="${esc(id)}"><code>${esc(id)}</code></button>`;
    if (list.length) {
      for (const d of list) {
        out.push(`<div class="alert alert-danger cycle-alert"><p><strong><span aria-hidden="true">∞</span> ${m.run.status === 'deadlocked' ? 'Deadlocked' : 'Cycle'}:</strong> these calls wait on each other, so none of them can ever run:</p>
          <p class="cycle-path">${d.callIds.map(callBtn).join(' → ')}</p>
          <p class="muted">Their references or <code>after</code> rules form a loop. The calls that depend on them are blocked too; everything else ran. Fix the batch so that one of them goes first, and submit it again.</p></div>`);
      }
    } else if (m.run.status === 'deadlocked') {
      const stuck = m.calls.filter((c) => c.status === 'blocked' && c.blockedBy?.code === 'dependency_blocked');
      out.push(`<div class="alert alert-danger"><p><strong><span aria-hidden="true">∞</span> Deadlocked:</strong> nothing could run any more. ${stuck
        .slice(0, 10)
        .map((c) => `${callBtn(c.id)} ${esc(c.blockedBy.message)}`)
        .join('; ')}</p></div>`);
    }
    if (m.replanContext) {
      const rc = m.replanContext;
      out.push(`<div class="alert alert-warn"><p><strong><span aria-hidden="true">↻</span> Needs a replan:</strong> ${rc.failed.map((f) => `${callBtn(f.callId)} failed (${esc(f.error?.code ?? '')})`).join(', ')}.
        ${rc.waiting.length ? `${plural(rc.waiting.length, 'call')} wait for new calls: ${rc.waiting.slice(0, 12).map(callBtn).join(' ')}.` : ''}
        ${rc.sideEffects.length ? `Calls with side effects that already ran: ${rc.sideEffects.slice(0, 12).map(callBtn).join(' ')}.` : ''}</p>
        <p class="muted">The agent continues with <code>POST /v1/runs/${esc(m.run.id)}/replan</code>.</p></div>`);
    }
    const other = m.diagnostics.filter((d) => d.code !== 'cycle');
    if (other.length) {
      out.push(`<div class="alert alert-info"><p><strong>Plan diagnostics</strong></p><ul>${other
        .slice(0, 20)
        .map((d) => `<li>${d.callId ? `${callBtn(d.callId)} ` : ''}<code>${esc(d.code)}</code>: ${esc(d.message)}</li>`)
        .join('')}</ul></div>`);
    }
    this.el.querySelector('.alerts').innerHTML = out.join('');
  }

  renderStuck() {
    const m = this.model;
    const groups = { blocked: [], awaiting_review: [], ready: [], failed: [] };
    for (const c of m.calls) if (groups[c.status]) groups[c.status].push(c);
    const callBtn = (id) => `<button type="button" class="linklike" data-open="${esc(id)}"><code>${esc(id)}</code></button>`;
    const item = (c) => {
      const r = m.reason(c);
      const on = r?.on && r.on !== c.id ? ` · <span class="waits">waits on ${callBtn(r.on)}${m.call(r.on) ? ` (${esc(label(m.call(r.on).status))})` : ''}</span>` : '';
      return `<li data-call="${esc(c.id)}">${callBtn(c.id)} — <span class="code">${esc(r?.code ?? c.status)}</span>: <span class="reason-text">${esc(r?.text ?? '')}</span>${on}</li>`;
    };
    const titles = { blocked: 'Blocked', awaiting_review: 'Awaiting review', ready: 'Ready, waiting for a limit', failed: 'Failed' };
    const html = Object.entries(groups)
      .filter(([, list]) => list.length)
      .map(([s, list]) => `<div class="stuck-group st-${s}"><h3>${badge(s)} ${titles[s]} <span class="muted">(${list.length})</span></h3><ul>${list.slice(0, 30).map(item).join('')}</ul>${list.length > 30 ? `<p class="muted">and ${list.length - 30} more</p>` : ''}</div>`)
      .join('');
    const section = this.el.querySelector('.stuck');
    section.hidden = !html;
    section.querySelector('.stuck-body').innerHTML = html;
  }

  renderReviews() {
    const section = this.el.querySelector('.reviews');
    const list = section.querySelector('.review-list');
    const have = new Set([...list.querySelectorAll('form[data-review]')].map((f) => f.dataset.review));
    const want = new Set(this.reviews.map((r) => r.id));
    for (const f of list.querySelectorAll('form[data-review]')) if (!want.has(f.dataset.review)) f.remove();
    for (const r of this.reviews) {
      if (have.has(r.id)) continue;
      const fid = `rv-${r.id.replace(/[^A-Za-z0-9_-]/g, '_')}`;
      list.append(
        el(`<form class="review" data-review="${esc(r.id)}" data-call="${esc(r.callId)}" aria-labelledby="${fid}-h">
          <h3 id="${fid}-h">Call <button type="button" class="linklike" data-open="${esc(r.callId)}"><code>${esc(r.callId)}</code></button> · <span class="muted">${esc(r.tool)}</span></h3>
          <p class="reason">${esc(r.reason)}</p>
          <label for="${fid}-args">Args (JSON; change them, then “Approve with these args”)</label>
          <textarea id="${fid}-args" name="args" rows="${Math.min(6, json(r.args).split('\n').length)}" spellcheck="false">${esc(JSON.stringify(r.args, null, 2))}</textarea>
          <label for="${fid}-comment">Comment (optional)</label>
          <input id="${fid}-comment" name="comment" autocomplete="off">
          <div class="buttons">
            <button type="submit" value="approve" class="primary">Approve</button>
            <button type="submit" value="edit">Approve with these args</button>
            <button type="submit" value="reject" class="danger">Reject</button>
          </div>
          <p class="msg" role="alert"></p>
        </form>`),
      );
    }
    section.hidden = this.reviews.length === 0;
    this.layoutSide();
  }

  renderTimeline() {
    const m = this.model;
    this.timeline.render(m, this.serverNow());
    const w = waits(m);
    this.el.querySelector('.tl-summary').textContent = w.count
      ? `${plural(w.count, 'attempt')} waited for a limit (ready → started), ${fmtMs(w.total)} in all; the longest: ${w.longest.id}, ${fmtMs(w.longest.ms)}.`
      : 'No call waited for a limit.';
  }

  renderDetails() {
    const panel = this.el.querySelector('.details');
    const m = this.model;
    const c = this.selected ? m.call(this.selected) : undefined;
    if (!c) {
      panel.hidden = true;
      panel.innerHTML = '';
      return;
    }
    const focused = panel.contains(document.activeElement) ? document.activeElement : null;
    const focusKey = focused?.dataset?.open ?? (focused?.tagName === 'H2' ? 'h2' : focused?.classList?.contains('close') ? 'close' : null);
    const keepScroll = panel.scrollTop;
    const r = m.reason(c);
    const callBtn = (id) => `<button type="button" class="linklike" data-open="${esc(id)}"><code>${esc(id)}</code></button>`;
    const ins = m.edges.filter((e) => e.to === c.id);
    const outs = m.edges.filter((e) => e.from === c.id);
    const edgeList = (list, key) =>
      list.length
        ? `<ul class="edges">${list
            .slice(0, 50)
            .map((e) => `<li><span class="ek k-${esc(e.kind)}">${esc(e.kind)}</span> ${callBtn(e[key])} <span class="muted">${esc(e.reason)}</span></li>`)
            .join('')}${list.length > 50 ? `<li class="muted">and ${list.length - 50} more</li>` : ''}</ul>`
        : '<p class="muted">none</p>';
    const attempts = c.timing.attempts.length
      ? `<table class="attempts"><thead><tr><th scope="col">#</th><th scope="col">Waited for a limit</th><th scope="col">Ran</th><th scope="col">Outcome</th></tr></thead><tbody>${c.timing.attempts
          .map((a) => {
            const waited = a.readyAt !== undefined ? (a.startedAt ?? a.waitEndAt ?? this.serverNow()) - a.readyAt : undefined;
            const ran = a.startedAt !== undefined ? (a.endedAt ?? this.serverNow()) - a.startedAt : undefined;
            return `<tr><td>${a.n}</td><td>${fmtMs(waited)}</td><td>${a.startedAt !== undefined ? fmtMs(ran) : 'not started'}</td><td>${esc(a.outcome ?? (a.startedAt !== undefined ? 'running' : 'waiting'))}${a.error ? ` — <code>${esc(a.error.code)}</code> ${esc(a.error.message ?? '')}` : ''}</td></tr>`;
          })
          .join('')}</tbody></table>`
      : '<p class="muted">No attempt yet.</p>';
    const block = (title, value, cls = '') => `<h3>${title}</h3><pre class="json ${cls}" tabindex="0">${esc(json(value))}</pre>`;
    const why =
      r && c.status !== 'succeeded' && c.status !== 'running'
        ? `<div class="why-box st-${esc(c.status)}"><p><strong>${esc(r.code)}</strong>: ${esc(r.text)}</p>${
            r.on && r.on !== c.id ? `<p>Waits on ${callBtn(r.on)}${m.call(r.on) ? ` — ${badge(m.call(r.on).status)}` : ''}</p>` : ''
          }${r.cycle ? `<p>Cycle: ${r.cycle.map(callBtn).join(' → ')}</p>` : ''}</div>`
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
      ${block('Args', c.args)}
      ${c.resolvedArgs !== undefined ? block('Resolved args', c.resolvedArgs) : ''}
      ${c.status === 'succeeded' || c.output != null ? block('Output', c.output) : ''}
      ${c.error ? block('Error', c.error, 'err') : ''}
      ${c.blockedBy ? block('Blocked by', c.blockedBy, 'err') : ''}
      ${c.compensation ? block('Compensation', c.compensation) : ''}
      <p class="muted small">Esc closes the details.</p>`;
    panel.hidden = false;
    panel.scrollTop = keepScroll;
    panel.querySelector('.close').addEventListener('click', () => {
      const id = this.selected;
      this.select(null, false);
      this.graph.focus(id);
    });
    if (focusKey === 'h2') panel.querySelector('h2').focus({ preventScroll: true });
    else if (focusKey === 'close') panel.querySelector('.close').focus({ preventScroll: true });
    else if (focusKey) panel.querySelector(`[data-open="${CSS.escape(focusKey)}"]`)?.focus({ preventScroll: true });
  }
}

const GRAPH_LEGEND = `<div class="legend" aria-label="Legend">
  <ul class="legend-status">${CALL_STATUSES.map(
    (s) => `<li><svg width="22" height="14" aria-hidden="true" class="sw s-${s}"><rect class="box" x="1" y="1" width="20" height="12" rx="3"/><rect class="pat" x="1" y="1" width="20" height="12" rx="3"/></svg><span aria-hidden="true">${GLYPH[s]}</span> ${label(s)}</li>`,
  ).join('')}<li><svg width="22" height="14" aria-hidden="true" class="sw cycle-sw"><rect class="box" x="1" y="1" width="20" height="12" rx="3"/></svg>∞ on a cycle</li></ul>
  <ul class="legend-edges">${['data', 'conflict', 'policy']
    .map((k) => `<li><svg width="34" height="10" aria-hidden="true" class="edge-sw k-${k}"><path class="line" d="M1,5 H33"/></svg> ${k}${k === 'data' ? ' (a reference)' : k === 'conflict' ? ' (shared resource)' : ' (after / requires)'}</li>`)
    .join('')}</ul>
</div>`;

const TIMELINE_LEGEND = `<ul class="legend legend-tl" aria-label="Timeline legend">
  <li><svg width="26" height="12" aria-hidden="true"><rect class="bar wait" width="26" height="12"/></svg> waiting for a limit (ready → started)</li>
  <li><svg width="26" height="12" aria-hidden="true"><rect class="bar review" width="26" height="12"/></svg> awaiting review</li>
  <li><svg width="26" height="12" aria-hidden="true"><rect class="bar run o-running" width="26" height="12"/></svg> running</li>
  <li><svg width="26" height="12" aria-hidden="true"><rect class="bar run o-succeeded" width="26" height="12"/></svg> succeeded</li>
  <li><svg width="26" height="12" aria-hidden="true"><rect class="bar run o-failed" width="26" height="12"/></svg> failed / retried</li>
  <li><svg width="26" height="12" aria-hidden="true"><line class="backoff" x1="0" x2="26" y1="6" y2="6"/></svg> retry backoff</li>
</ul>`;

route();
updateWho();
