// The runs list (#/, filters in the query): every run, newest first, updated live from /v1/stream,
// with counts per status, filters (status, tenant, tags) and a "needs attention" view that reads the
// calls of live and failed runs to say why each one needs an operator.

import { api, stream } from '../api.js';
import { el, errorText, find, markNav, setHash } from '../dom.js';
import { ATTENTION, attentionReasons, LONG_WAIT_S, mapLimit, summarize } from './attention.js';
import { hasOwners, ownerHtml } from '../cluster.js';
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
  label,
  plural,
  RUN_STATUSES,
} from '../util.js';

/**
 * @typedef {import('./attention.js').RunRow} RunRow
 * @typedef {import('../api.js').RunSummary} RunSummary
 * @typedef {{ status: string, tenant: string, tag: string, attention: boolean, wait: number }} Filters
 *   `tag`: `key:value` pairs, separated by spaces or commas; `wait`: LONG_WAIT_S or one of WAIT_CHOICES
 * @typedef {HTMLElement & { status: HTMLSelectElement, tenant: HTMLInputElement, tag: HTMLInputElement }} FiltersForm
 *   the filters' form, with its controls by name
 */

/** How long a call may wait for a limit before its run needs attention (s): the choices. */
const WAIT_CHOICES = [1, 10, 30, 120, 600];

export class RunsPage {
  /** @param {URLSearchParams} params  the address's query: the filters */
  constructor(params) {
    /** @type {Filters} */
    this.filters = {
      status: params.get('status') ?? '',
      tenant: params.get('tenant') ?? '',
      tag: params.getAll('tag').join(' '),
      attention: params.get('attention') === '1',
      wait: WAIT_CHOICES.includes(Number(params.get('wait'))) ? Number(params.get('wait')) : LONG_WAIT_S,
    };
    /** @type {Map<string, RunRow>} */
    this.rows = new Map();
    /**
     * Summaries from the live stream, with when they came: fresher than a page fetched before.
     * @type {Map<string, { at: number, summary: RunRow }>}
     */
    this.streamed = new Map();
    /** @type {Set<string>} */
    this.visible = new Set();
    /** @type {Map<string, number>} */
    this.fresh = new Map();
    /** @type {Map<string, number>} */
    this.reviewRuns = new Map();
    /** @type {Record<string, number> | null} */
    this.counts = null;
    /** @type {string | null} */
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
      <p class="attention-help" hidden>Runs that need an operator: deadlocked, needs replan, failed or partial, with blocked or failed calls, with calls awaiting review, or with a call that has waited for a limit or lock longer than
        <select name="wait" aria-label="How long a call may wait for a limit before its run needs attention">${WAIT_CHOICES.map((w) => `<option value="${w}">${w < 60 ? `${w} s` : `${w / 60} min`}</option>`).join('')}</select>.</p>
      <div class="table-wrap"><table class="runs">
        <caption class="sr-only">Runs, newest first</caption>
        <thead><tr><th scope="col">Run</th><th scope="col">Status</th><th scope="col" class="c-owner" hidden>Replica</th><th scope="col">Attention</th><th scope="col">Calls</th><th scope="col" class="c-tenant">Tenant</th><th scope="col" class="c-tags">Tags</th><th scope="col" class="c-created">Created</th><th scope="col" class="c-dur">Duration</th></tr></thead>
        <tbody></tbody>
      </table></div>
      <p class="empty" hidden>No runs match these filters.</p>
      <p class="list-error" role="alert" hidden></p>
      <button type="button" class="more" hidden>Load more</button>
    </section>`);
    const form = /** @type {FiltersForm} */ (find(this.el, '.filters'));
    form.status.value = this.filters.status;
    form.tenant.value = this.filters.tenant;
    form.tag.value = this.filters.tag;
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.apply({ status: form.status.value, tenant: form.tenant.value.trim(), tag: form.tag.value.trim() });
    });
    form.status.addEventListener('change', () => this.apply({ status: form.status.value }));
    find(form, '.clear').addEventListener('click', () => {
      form.status.value = '';
      form.tenant.value = '';
      form.tag.value = '';
      this.apply({ status: '', tenant: '', tag: '', attention: false });
    });
    find(form, '.attention-toggle').addEventListener('click', () => this.apply({ attention: !this.filters.attention }));
    const waitSelect = find(this.el, 'select[name="wait"]', HTMLSelectElement);
    waitSelect.value = String(this.filters.wait);
    waitSelect.addEventListener('change', () => this.apply({ wait: Number(waitSelect.value) }));
    find(this.el, '.counts').addEventListener('click', (ev) => {
      const b = /** @type {HTMLButtonElement | null} */ (/** @type {Element} */ (ev.target).closest('button[data-status]'));
      if (!b) return;
      const s = /** @type {string} */ (b.dataset.status);
      const next = this.filters.status === s ? '' : s;
      form.status.value = next;
      this.apply({ status: next, attention: false });
    });
    find(this.el, '.more').addEventListener('click', () => this.load(true));
    find(this.el, 'tbody').addEventListener('click', (ev) => {
      const target = /** @type {Element} */ (ev.target);
      if (target.closest('a')) return;
      const tr = /** @type {HTMLTableRowElement | null} */ (target.closest('tr[data-id]'));
      if (tr) location.hash = `#/runs/${encodeURIComponent(/** @type {string} */ (tr.dataset.id))}`;
    });
  }

  start() {
    document.title = 'toolgraph · runs';
    find(this.el, 'h1').focus({ preventScroll: true });
    this.connect();
    this.load(false);
    this.tick();
    // Several replicas: a column names the replica that owns each unfinished run.
    hasOwners().then((on) => {
      this.owners = on;
      find(this.el, 'th.c-owner').hidden = !on;
      this.schedule();
    });
  }

  /** Durations move on; in the attention view a waiting call crosses the threshold in time. */
  tick() {
    clearInterval(this.ticker);
    this.ticker = setInterval(
      () => {
        if (this.filters.attention) for (const [id, r] of this.rows) if (this.matches(r)) this.visible.add(id);
        this.schedule();
      },
      this.filters.attention ? 1000 : 15_000,
    );
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

  /** @param {Partial<Filters>} change */
  apply(change) {
    const err = find(this.el, '.form-error');
    const next = { ...this.filters, ...change };
    const bad = next.tag
      .split(/[\s,]+/)
      .filter(Boolean)
      .find((t) => !/^[^:]+:.*$/.test(t));
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
    const attentionChanged = next.attention !== this.filters.attention;
    this.filters = next;
    const params = new URLSearchParams();
    if (next.status) params.set('status', next.status);
    if (next.tenant) params.set('tenant', next.tenant);
    for (const t of this.tags()) params.append('tag', t);
    if (next.attention) params.set('attention', '1');
    if (next.attention && next.wait !== LONG_WAIT_S) params.set('wait', String(next.wait));
    setHash('/', params);
    if (attentionChanged) this.tick();
    markNav(next.attention ? 'attention' : 'runs');
    if (tenantChanged) this.connect();
    this.load(false);
  }

  /**
   * @param {string[]} statuses
   * @param {number} limit
   */
  query(statuses, limit) {
    const qs = new URLSearchParams();
    for (const s of statuses) qs.append('status', s);
    if (this.filters.tenant) qs.set('tenant', this.filters.tenant);
    for (const t of this.tags()) qs.append('tag', t);
    qs.set('limit', String(limit));
    return qs;
  }

  /** @param {boolean} more  the next page (else the first) */
  async load(more) {
    this.loading?.abort();
    const ac = new AbortController();
    this.loading = ac;
    const errEl = find(this.el, '.list-error');
    const asked = performance.now();
    this.el.setAttribute('aria-busy', 'true');
    try {
      const reviews = /** @type {Promise<import('../api.js').Page<import('../api.js').Review>>} */ (
        api('/v1/reviews?status=pending', { signal: ac.signal })
      );
      /** @type {RunRow[]} */
      let items;
      /** @type {string | null} */
      let cursor = null;
      if (this.filters.attention) {
        const wanted = this.filters.status ? [this.filters.status] : ATTENTION;
        const ended = wanted.filter((s) => ATTENTION.includes(s));
        const qs = this.query(ended, 100);
        if (more && this.nextCursor) qs.set('cursor', this.nextCursor);
        const [page1, running] = await Promise.all([
          ended.length
            ? /** @type {Promise<import('../api.js').Page<RunSummary>>} */ (api(`/v1/runs?${qs}`, { signal: ac.signal }))
            : { items: [], nextCursor: null },
          !more && (!this.filters.status || this.filters.status === 'running')
            ? /** @type {Promise<import('../api.js').Page<RunSummary>>} */ (
                api(`/v1/runs?${this.query(['running', 'queued'], 50)}`, { signal: ac.signal })
              )
            : { items: [] },
        ]);
        const rv = await reviews;
        this.setReviews(rv.items);
        // A live run needs attention when a call is blocked, failed or awaiting review, and an ended
        // one is worth a word on why (a cycle, how many calls are blocked): read their calls. The
        // list's items do not carry per-status call counts.
        const read = [...running.items, ...page1.items.slice(0, 50)];
        const views = await mapLimit(read, 6, (r) =>
          /** @type {Promise<import('../api.js').Run>} */ (api(`/v1/runs/${encodeURIComponent(r.id)}`, { signal: ac.signal })).then(
            summarize,
          ),
        );
        const byId = new Map(/** @type {RunRow[]} */ (views.filter(Boolean)).map((v) => [v.id, v]));
        items = [...page1.items, ...running.items].map((r) => byId.get(r.id) ?? r);
        cursor = page1.nextCursor;
      } else {
        const qs = this.query(this.filters.status ? [this.filters.status] : [], 50);
        if (more && this.nextCursor) qs.set('cursor', this.nextCursor);
        const res = /** @type {import('../api.js').Page<RunSummary>} */ (await api(`/v1/runs?${qs}`, { signal: ac.signal }));
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
      if (/** @type {{ name?: string }} */ (e)?.name === 'AbortError') return;
      errEl.hidden = false;
      errEl.textContent = `Could not load runs: ${errorText(e)}`;
    } finally {
      if (this.loading === ac) this.el.removeAttribute('aria-busy');
    }
    this.loaded = true;
    this.schedule();
  }

  /** @param {import('../api.js').Review[]} items  the pending reviews */
  setReviews(items) {
    this.reviewRuns.clear();
    for (const r of items) this.reviewRuns.set(r.runId, (this.reviewRuns.get(r.runId) ?? 0) + 1);
  }

  connect() {
    this.live?.close();
    const state = find(this.el, '.live');
    const qs = this.filters.tenant ? `?tenant=${encodeURIComponent(this.filters.tenant)}` : '';
    this.live = stream(`/v1/stream${qs}`, {
      onEvent: ({ event, data }) => {
        if (event === 'counts') {
          this.counts = /** @type {{ counts: Record<string, number> }} */ (data).counts;
          this.schedule();
        } else if (event === 'run') this.upsert(/** @type {RunRow} */ (data));
      },
      onState: (s, e) => {
        state.dataset.state = s;
        state.textContent =
          s === 'open'
            ? 'Live'
            : s === 'reconnecting'
              ? 'Reconnecting…'
              : s === 'error'
                ? `Live updates off: ${errorText(e)}`
                : 'Live updates off';
        if (s === 'open' && this.loaded) this.load(false);
      },
    });
  }

  /** @param {RunRow} s  a run's summary from the live stream */
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

  /** @param {RunRow} r */
  matches(r) {
    const f = this.filters;
    if (f.status && r.status !== f.status) return false;
    if (f.tenant && r.tenant !== f.tenant) return false;
    for (const t of this.tags()) {
      const i = t.indexOf(':');
      if (r.tags?.[t.slice(0, i)] !== t.slice(i + 1)) return false;
    }
    if (f.attention && !ATTENTION.includes(r.status) && attentionReasons(r, this.reviewRuns, Date.now(), f.wait).length === 0) return false;
    return true;
  }

  render() {
    if (this.destroyed) return;
    const f = this.filters;
    find(this.el, '.attention-toggle').setAttribute('aria-pressed', String(f.attention));
    find(this.el, '.attention-help').hidden = !f.attention;
    find(this.el, 'h1').textContent = f.attention ? 'Runs that need attention' : 'Runs';
    if (this.counts) {
      const total = Object.values(this.counts).reduce((a, b) => a + b, 0);
      find(this.el, '.counts').innerHTML =
        `<span class="count-total">${plural(total, 'run')}${this.filters.tenant ? ` of ${esc(this.filters.tenant)}` : ''}</span>` +
        RUN_STATUSES.map((s) => {
          const n = this.counts?.[s] ?? 0;
          return `<button type="button" class="chip st-${s}${n ? '' : ' zero'}" data-status="${s}" aria-pressed="${f.status === s}"><span aria-hidden="true">${GLYPH[s]}</span> ${label(s)} <b>${n}</b></button>`;
        }).join('');
    }
    const now = Date.now();
    const ids = /** @type {RunRow[]} */ ([...this.visible].map((id) => this.rows.get(id)).filter(Boolean));
    ids.sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
    const html = ids.slice(0, 500).map((r) => {
      const reasons = attentionReasons(r, this.reviewRuns, now, f.wait)
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
        ${this.owners ? `<td class="c-owner">${ownerHtml(ENDED_RUN.has(r.status) && r.status !== 'needs_replan' ? null : r.owner)}</td>` : ''}
        <td class="c-why">${reasons || '<span class="muted">–</span>'}</td>
        <td class="c-calls">${r.callCount}${breakdown ? `<div class="muted small">${esc(breakdown)}</div>` : ''}</td>
        <td class="c-tenant">${esc(r.tenant)}</td>
        <td class="c-tags">${tags}</td>
        <td class="c-created"><time datetime="${esc(r.createdAt)}" title="${esc(fmtTime(r.createdAt))}">${esc(ago(r.createdAt, now))}</time></td>
        <td class="c-dur">${r.endedAt ? fmtMs(end - Date.parse(r.createdAt)) : `<span class="muted">${fmtMs(end - Date.parse(r.createdAt))} so far</span>`}</td>
      </tr>`;
    });
    find(this.el, 'tbody').innerHTML = html.join('');
    find(this.el, '.empty').hidden = !this.loaded || ids.length > 0;
    find(this.el, '.more').hidden = !this.nextCursor;
  }
}
