// The replicas (#/replicas): every replica that serves this API, with the health of its lease (alive,
// how long the lease still holds, its last renewal), the runs it owns, with links to them. Refreshed
// every second from GET /v1/replicas and the list of unfinished runs (whose `owner` names a replica).
// With SQLite there is one replica and no lease: the page says so.

import { api } from '../api.js';
import { el, errorText, find } from '../dom.js';
import { ago, esc, fmtMs, fmtTime, plural } from '../util.js';

const REFRESH_MS = 1000;
const SHOWN_RUNS = 8;

export class ReplicasPage {
  constructor() {
    this.el = el(`<section class="page replicas-page">
      <div class="page-head"><h1 tabindex="-1">Replicas</h1><span class="replicas-summary muted" role="status"></span></div>
      <p class="replicas-help"></p>
      <div class="table-wrap"><table class="runs replicas">
        <caption class="sr-only">Replicas and their leases</caption>
        <thead><tr><th scope="col">Replica</th><th scope="col">Lease</th><th scope="col">Lease left</th><th scope="col">Last renewal</th><th scope="col">Owned runs</th><th scope="col" class="c-created">Started</th></tr></thead>
        <tbody></tbody>
      </table></div>
      <p class="list-error" role="alert" hidden></p>
    </section>`);
  }

  start() {
    document.title = 'toolgraph · replicas';
    find(this.el, 'h1').focus({ preventScroll: true });
    this.refresh();
  }

  destroy() {
    this.destroyed = true;
    clearTimeout(this.timer);
    this.loading?.abort();
  }

  async refresh() {
    const ac = new AbortController();
    this.loading = ac;
    const errEl = find(this.el, '.list-error');
    try {
      const qs = new URLSearchParams([
        ['status', 'queued'],
        ['status', 'running'],
        ['status', 'needs_replan'],
        ['limit', '200'],
      ]);
      const [replicas, runs] = await Promise.all([
        /** @type {Promise<import('../api.js').Replicas>} */ (api('/v1/replicas', { signal: ac.signal })),
        /** @type {Promise<import('../api.js').Page<import('../api.js').RunSummary>>} */ (api(`/v1/runs?${qs}`, { signal: ac.signal })),
      ]);
      if (this.destroyed) return;
      this.render(replicas, runs.items);
      errEl.hidden = true;
    } catch (e) {
      if (/** @type {{ name?: string }} */ (e)?.name === 'AbortError' || this.destroyed) return;
      errEl.hidden = false;
      errEl.textContent = `Could not load the replicas: ${errorText(e)}`;
    }
    if (!this.destroyed) this.timer = setTimeout(() => this.refresh(), REFRESH_MS);
  }

  /**
   * @param {import('../api.js').Replicas} data
   * @param {import('../api.js').RunSummary[]} runs  the runs not ended
   */
  render(data, runs) {
    /** @type {Map<string, string[]>} */
    const byOwner = new Map();
    for (const r of runs) if (r.owner) byOwner.set(r.owner, [...(byOwner.get(r.owner) ?? []), r.id]);
    const clustered = data.store === 'postgres';
    const alive = data.items.filter((r) => r.alive).length;
    this.el.dataset.store = data.store;
    find(this.el, '.replicas-summary').textContent = clustered
      ? `${plural(data.items.length, 'replica')}, ${alive} alive · lease ${fmtMs(data.leaseMs)} · this page is served by ${data.replica}`
      : `one process on ${data.store}`;
    find(this.el, '.replicas-help').innerHTML = clustered
      ? 'Each replica renews its lease every third of the lease. A replica whose lease ends (it died, hung or lost the database) has its runs taken over by another within the lease and about a second more.'
      : 'This server keeps its runs in SQLite: one process, no leases. Several replicas share a PostgreSQL store (<code>--db postgres://…</code>, each with its own <code>--replica-id</code>).';
    const now = Date.now();
    const aliveNames = new Set(data.items.filter((r) => r.alive).map((r) => r.name));
    find(this.el, 'tbody').innerHTML = data.items
      .map((r) => {
        // Runs name their owner by name: a dead instance of a name that is alive again (a restart) is
        // not the one they mean.
        const ids = r.alive || !aliveNames.has(r.name) ? (byOwner.get(r.name) ?? []) : [];
        const shown = ids.slice(0, SHOWN_RUNS);
        const links = shown.map((id) => `<a href="#/runs/${encodeURIComponent(id)}"><code>${esc(id)}</code></a>`).join(' ');
        const more =
          shown.length > 0 && r.ownedRuns > shown.length ? ` <span class="muted small">and ${r.ownedRuns - shown.length} more</span>` : '';
        const health = r.alive
          ? '<span class="badge st-succeeded"><span aria-hidden="true">●</span> alive</span>'
          : '<span class="badge st-failed"><span aria-hidden="true">✗</span> lease ended</span>';
        const left =
          r.leaseLeftMs === null
            ? '<span class="muted">no lease</span>'
            : `<meter min="0" max="${data.leaseMs}" low="${Math.round((data.leaseMs ?? 0) / 2)}" optimum="${data.leaseMs}" value="${r.leaseLeftMs}" aria-label="Lease left of ${esc(r.name)}"></meter> ${fmtMs(r.leaseLeftMs)}`;
        // While the lease holds, its renewal's age is on the database's clock (the lease runs leaseMs from it;
        // a replica with a lease has a leaseMs).
        const renewedAgo = r.alive && r.leaseLeftMs !== null ? (data.leaseMs ?? 0) - r.leaseLeftMs : now - Date.parse(r.renewedAt ?? '');
        const renewed = r.renewedAt
          ? `<time datetime="${esc(r.renewedAt)}" title="${esc(fmtTime(r.renewedAt))}">${esc(agoText(renewedAgo, r.renewedAt, now))}</time>`
          : '<span class="muted">–</span>';
        return `<tr data-replica="${esc(r.name)}" data-instance="${esc(r.instance)}" data-alive="${r.alive}">
          <th scope="row"><b>${esc(r.name)}</b>${r.self ? ' <span class="tag">this one</span>' : ''}<div class="muted small"><code>${esc(r.instance)}</code></div></th>
          <td>${health}</td>
          <td class="c-lease">${left}</td>
          <td>${renewed}</td>
          <td class="c-owned"><b class="owned-count">${r.ownedRuns}</b>${links ? `<div class="owned-runs">${links}${more}</div>` : ''}</td>
          <td class="c-created"><time datetime="${esc(r.startedAt)}" title="${esc(fmtTime(r.startedAt))}">${esc(ago(r.startedAt, now))}</time></td>
        </tr>`;
      })
      .join('');
    this.el.dataset.loaded = 'true';
  }
}

/**
 * How long ago, to a tenth of a second under a minute (a lease renews every few seconds).
 * @param {number} ms
 * @param {string} iso
 * @param {number} now
 */
function agoText(ms, iso, now) {
  return ms < 60_000 ? `${(Math.max(0, ms) / 1000).toFixed(1)} s ago` : ago(iso, now);
}
