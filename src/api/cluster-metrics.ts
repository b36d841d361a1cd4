/**
 * Metrics of one replica of a cluster (DESIGN §12), each labelled with the replica's name: the runs it
 * owns, the runs it took over, its lease renewals' round trips, and its asks for cluster-wide permits
 * (how many, how many refused, how long they took).
 */
import { Gauge, type Registry } from 'prom-client';
import type { Cluster } from '../cluster/cluster.js';

export function clusterMetrics(registry: Registry, cluster: Cluster): void {
  const replica = cluster.name;
  const gauge = (name: string, help: string, value: () => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['replica'],
      registers: [registry],
      collect() {
        this.set({ replica }, value());
      },
    });
  const s = cluster.stats;
  gauge('toolgraph_replica_owned_runs', 'Runs this replica owns and runs now', () => cluster.ownedRuns());
  gauge('toolgraph_replica_takeovers_total', 'Runs this replica took over from a replica whose lease ended', () => s.takeovers);
  gauge('toolgraph_replica_lease_losses_total', 'Times this replica lost its lease (and dropped its runs)', () => s.leaseLosses);
  gauge(
    'toolgraph_replica_lease_renew_seconds',
    'The round trip of the last lease renewal',
    () => (s.renewMs[s.renewMs.length - 1] ?? 0) / 1000,
  );
  gauge('toolgraph_replica_lease_renew_max_seconds', 'The slowest of the last 100 lease renewals', () => Math.max(0, ...s.renewMs) / 1000);
  gauge('toolgraph_replica_permit_asks_total', 'Calls that asked for a cluster-wide permit', () => s.permitAsks);
  gauge(
    'toolgraph_replica_permits_sliced_total',
    "Calls granted from this replica's slices of counted limits, with no round trip",
    () => s.permitsSliced,
  );
  gauge(
    'toolgraph_replica_permit_refusals_total',
    'Asks for a cluster-wide permit that were refused (the call waited)',
    () => s.permitRefusals,
  );
  gauge(
    'toolgraph_replica_permit_ask_seconds',
    'The round trip of the last ask for permits',
    () => (s.permitAskMs[s.permitAskMs.length - 1] ?? 0) / 1000,
  );
}
