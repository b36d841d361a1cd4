/**
 * Takeover of a dead replica's runs (DESIGN §12 "It scales"): three `toolgraph serve` processes on one
 * throwaway PostgreSQL (`store.leaseMs` 2000); r0 owns N runs, one idempotent call each, held at the
 * tool; r0 is killed with -9; the time from the kill until each call runs again on r1 or r2. Once with
 * `store.takeoverConcurrency: 1` (one resume at a time, as before the parallel takeover: the baseline)
 * and once with the default (32), in one process (`npm run bench:takeover [-- --runs 2000] [--variants one,parallel]`).
 */
import { parseArgs } from 'node:util';
import { startPostgres } from '../src/bench/postgres-cluster.js';
import { startCluster } from '../src/bench/replicas.js';
import { holdYaml } from './cluster-phases.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '2000' },
    lease: { type: 'string', default: '2000' },
    /** `one`: one resume at a time; `parallel`: the default. */
    variants: { type: 'string', default: 'one,parallel' },
  },
});
const RUNS = Number(values.runs);
const LEASE_MS = Number(values.lease);

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface Result {
  label: string;
  /** Kill → the last call re-run (ms). */
  last: number;
  median: number;
  byReplica: Record<string, number>;
  /** Runs whose call did not run again within a minute. */
  lost: number;
  /** Attempts beyond the one re-run. */
  extra: number;
}

async function once(
  label: string,
  takeoverConcurrency: number | undefined,
  pgc: Awaited<ReturnType<typeof startPostgres>>,
): Promise<Result> {
  const c = await startCluster(3, holdYaml, {
    pg: pgc,
    leaseMs: LEASE_MS,
    perReplicaUrls: true,
    logLevel: 'warn',
    ...(takeoverConcurrency ? { takeoverConcurrency } : {}),
  });
  try {
    const ids: string[] = [];
    for (let start = 0; start < RUNS; start += 50) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(50, RUNS - start) }, async (_, j) => {
          const r = await c.request(0, 'POST', '/v1/runs', { calls: [{ id: 'h', tool: 'hold_idem', args: { hold: true, i: start + j } }] });
          if (r.status !== 201) throw new Error(`submit: ${r.status} ${JSON.stringify(r.body)}`);
          return r.body.id as string;
        }),
      );
      ids.push(...batch);
    }
    for (let t = 0; !ids.every((id) => c.tools.of(id, 'h').length > 0); t++) {
      if (t > 6000) throw new Error('the calls did not all start on r0');
      await sleep(10);
    }
    // Somewhere in the renewal cycle.
    await sleep(Math.floor(Math.random() * (LEASE_MS / 3)));
    const killed = performance.now();
    await c.replicas[0]?.kill9();
    c.replicas[0] = undefined;
    const again = new Map<string, { start: number; replica: string }>();
    const deadline = killed + 60_000;
    while (again.size < ids.length && performance.now() < deadline) {
      for (const id of ids) {
        if (again.has(id)) continue;
        const a = c.tools.of(id, 'h').find((x) => x.replica !== 'r0');
        if (a) again.set(id, { start: a.start, replica: a.replica ?? '?' });
      }
      await sleep(20);
    }
    const ms = [...again.values()].map((a) => a.start - killed).sort((x, y) => x - y);
    const byReplica: Record<string, number> = {};
    for (const a of again.values()) byReplica[a.replica] = (byReplica[a.replica] ?? 0) + 1;
    // Let them end, then count attempts beyond the re-run (a lease lost on a loaded machine).
    const release = setInterval(() => c.tools.release(), 50);
    try {
      for (const id of ids) await c.ended(1, id, 120_000).catch(() => undefined);
    } finally {
      clearInterval(release);
    }
    const extra = ids.reduce((n, id) => n + Math.max(0, c.tools.of(id, 'h').length - 2), 0);
    return {
      label,
      last: ms[ms.length - 1] ?? Number.NaN,
      median: ms[Math.floor(ms.length / 2)] ?? Number.NaN,
      byReplica,
      lost: ids.length - again.size,
      extra,
    };
  } finally {
    await c.close();
  }
}

const pgc = await startPostgres();
try {
  const results: Result[] = [];
  const variants = new Set(values.variants.split(','));
  for (const [name, label, n] of [
    ['one', 'one at a time (takeoverConcurrency 1)', 1],
    ['parallel', 'parallel (default, 32)', undefined],
  ] as const) {
    if (!variants.has(name)) continue;
    console.error(`${label}…`);
    results.push(await once(label, n, pgc));
  }
  console.log(
    `\nTakeover of ${RUNS} runs (one held idempotent call each), store.leaseMs ${LEASE_MS}, kill -9 of their owner, two survivors:\n`,
  );
  console.log('| takeover | last re-run after kill | median | beyond the lease | by survivor | lost | extra attempts |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of results)
    console.log(
      `| ${r.label} | ${(r.last / 1000).toFixed(2)} s | ${(r.median / 1000).toFixed(2)} s | ${((r.last - LEASE_MS) / 1000).toFixed(2)} s | ${Object.entries(
        r.byReplica,
      )
        .sort()
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')} | ${r.lost} | ${r.extra} |`,
    );
  const [base, now] = results;
  if (base && now)
    console.log(`\nparallel / one at a time, time beyond the lease: ${((now.last - LEASE_MS) / (base.last - LEASE_MS)).toFixed(2)}×`);
} finally {
  await pgc.stop();
}
