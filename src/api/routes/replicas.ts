/**
 * `GET /v1/replicas` (operator only; an agent key gets 403): the replicas that serve this API, with the
 * health of their leases and the runs they own (DESIGN §12; the dashboard's Replicas page).
 *
 * - PostgreSQL: every replica that holds a lease, or held one in the last hour and did not leave
 *   cleanly (a replica that stops cleanly ends its lease and leaves the list; a killed one stays,
 *   `alive: false`, until its runs are taken over and the hour passes). Times are the database's.
 * - SQLite (one process): this process alone, with no lease (`leaseUntil`, `renewedAt`, `leaseLeftMs`
 *   and `leaseMs` are null), `alive`, and the runs it runs now.
 */
import type { FastifyInstance } from 'fastify';
import type { z } from 'zod';
import type { ReplicasSchema } from '../../contract/responses.js';
import { requireOperator } from '../auth.js';
import type { AppContext } from '../context.js';

type Replicas = z.infer<typeof ReplicasSchema>;

const iso = (ms: number): string => new Date(ms).toISOString();

export function replicaRoutes(app: FastifyInstance, ctx: AppContext): void {
  const startedAt = Date.now();

  app.get('/v1/replicas', async (req): Promise<Replicas> => {
    requireOperator(req.principal);
    const { service } = ctx;
    const cluster = service.cluster;
    if (!cluster) {
      const item = {
        name: service.replica,
        instance: service.replica,
        self: true,
        startedAt: iso(startedAt),
        leaseUntil: null,
        renewedAt: null,
        leaseLeftMs: null,
        alive: true,
        ownedRuns: service.engine.liveRuns().length,
      };
      return { store: service.store.kind, replica: service.replica, leaseMs: null, items: [item] };
    }
    const me = cluster.instance;
    const items = (await cluster.replicas()).map((r) => ({
      name: r.name,
      instance: r.instance,
      self: r.instance === me,
      startedAt: iso(r.startedAt),
      leaseUntil: iso(r.leaseUntil),
      renewedAt: iso(r.renewedAt),
      leaseLeftMs: r.leaseLeftMs,
      alive: r.alive,
      ownedRuns: r.ownedRuns,
    }));
    return { store: service.store.kind, replica: service.replica, leaseMs: cluster.leaseMs, items };
  });
}
