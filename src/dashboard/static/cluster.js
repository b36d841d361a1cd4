// Several replicas on PostgreSQL: what the pages need to show which replica owns a run. `replicas()`
// asks GET /v1/replicas once per page load (the store does not change while a server runs); the run
// list and the run page show an owner column only when the store is PostgreSQL.

import { api } from './api.js';
import { esc } from './util.js';

/** @type {Promise<import('./api.js').Replicas | null> | null} */
let asked = null;

/** `{ store, replica, leaseMs, items }`, or null when the server does not say (an old server, a 403). */
export function clusterInfo() {
  asked ??= /** @type {Promise<import('./api.js').Replicas>} */ (api('/v1/replicas')).catch(() => null);
  return asked;
}

/** Whether runs have owners here: several replicas share a PostgreSQL store. */
export async function hasOwners() {
  return (await clusterInfo())?.store === 'postgres';
}

/**
 * A run's owner as HTML: its name, linked to the Replicas page; a dash when it has none.
 * @param {string | null | undefined} owner
 */
export function ownerHtml(owner) {
  return owner ? `<a class="owner" href="#/replicas" title="The replica that runs it">${esc(owner)}</a>` : '<span class="muted">–</span>';
}
