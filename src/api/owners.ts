/**
 * Which replica owns a run (DESIGN §12), for `GET /v1/runs` and `GET /v1/runs/{id}`: the `owner` field,
 * the replica's `--replica-id`, while the run is not ended (`queued`, `running`, `needs_replan`); null
 * once it ended, and always with SQLite (one process). The store's answers stay as they are; the owner
 * is added here, from the cluster (one query per page or run, only with PostgreSQL).
 */
import type { RunView } from '../core/view.js';
import type { RunRecord } from '../store/types.js';
import type { Service } from './service.js';

const OWNED = new Set(['queued', 'running', 'needs_replan']);

/** A page of runs, each with its `owner`. */
export async function withOwners<P extends { items: RunRecord[] }>(
  service: Service,
  page: P,
): Promise<Omit<P, 'items'> & { items: (RunRecord & { owner: string | null })[] }> {
  const open = page.items.filter((r) => OWNED.has(r.status)).map((r) => r.id);
  const owners = service.cluster && open.length > 0 ? await service.cluster.owners(open) : new Map<string, string>();
  return { ...page, items: page.items.map((r) => ({ ...r, owner: OWNED.has(r.status) ? (owners.get(r.id) ?? null) : null })) };
}

/** The run, with its `owner`. */
export async function withOwner(service: Service, view: RunView): Promise<RunView & { owner: string | null }> {
  const cluster = service.cluster;
  if (!cluster || !OWNED.has(view.status)) return { ...view, owner: null };
  // This replica runs it: its own name, without asking the database.
  if (service.engine.has(view.id) && cluster.lease.holds) return { ...view, owner: cluster.name };
  return { ...view, owner: (await cluster.owners([view.id])).get(view.id) ?? null };
}
