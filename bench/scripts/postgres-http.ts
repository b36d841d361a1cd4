/**
 * The HTTP part of the bench on both durable stores, side by side in one run (`npx tsx bench/scripts/postgres-http.ts`):
 * SQLite (a temp file, WAL, synchronous = FULL) and PostgreSQL (a throwaway local cluster started here,
 * fsync on; postgres-cluster.ts), each with the bare route beside it as in `toolgraph bench`.
 * Reports runs/s, p50/p99, and what PostgreSQL costs per run: transactions (each append and each
 * read is one statement in its own transaction, so this is also the round trips) from
 * pg_stat_database, and rows written.
 *
 * Options (environment): CLIENTS (16), SECONDS (4), ROUNDS (3).
 */
import pg from 'pg';
import { runHttp, type HttpResult } from '../../src/bench/http.js';
import { createBuiltinExecutor } from '../../src/executors/builtin.js';
import { openPostgresStore } from '../../src/store/postgres.js';
import { startPostgres } from '../../src/bench/postgres-cluster.js';

const opts = {
  clients: Number(process.env.CLIENTS ?? 16),
  durationMs: Number(process.env.SECONDS ?? 4) * 1000,
  rounds: Number(process.env.ROUNDS ?? 3),
  warmupMs: 1000,
  log: (line: string) => console.error(line),
};

interface DbStats {
  xact: number;
  inserted: number;
  updated: number;
}

async function stats(url: string): Promise<DbStats> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    // Counters of other sessions reach pg_stat_database with a small delay: clear the snapshot first.
    await c.query('SELECT pg_stat_clear_snapshot()');
    const r = await c.query<{ xact: string; ins: string; upd: string }>(
      'SELECT xact_commit + xact_rollback AS xact, tup_inserted AS ins, tup_updated AS upd FROM pg_stat_database WHERE datname = current_database()',
    );
    const row = r.rows[0] as { xact: string; ins: string; upd: string };
    return { xact: Number(row.xact), inserted: Number(row.ins), updated: Number(row.upd) };
  } finally {
    await c.end();
  }
}

const row = (name: string, r: HttpResult) =>
  `| ${name} | ${r.runsPerSec.toFixed(0)} | ${r.bareRunsPerSec.toFixed(0)} | ${(r.ratio * 100).toFixed(1)}% | ${r.p50Ms.toFixed(1)} / ${r.p99Ms.toFixed(1)} | ${r.errors} |`;

const executor = createBuiltinExecutor();
const sqlite = await runHttp(opts, executor);
const cluster = await startPostgres();
try {
  const url = await cluster.createDatabase();
  const store = await openPostgresStore({ url });
  const before = await stats(url);
  const postgres = await runHttp(opts, executor, undefined, store);
  await new Promise((r) => setTimeout(r, 1000));
  const after = await stats(url);
  await store.close();
  const runs = await (async () => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    const n = Number((await c.query<{ n: string }>('SELECT count(*) AS n FROM runs')).rows[0]?.n ?? 0);
    await c.end();
    return n;
  })();
  console.log(
    `HTTP, ${opts.clients} clients, ${opts.rounds} rounds of ${opts.durationMs / 1000} s, 5 echo calls per run (node ${process.version})\n`,
  );
  console.log('| store | toolgraph runs/s | bare runs/s | ratio | p50 / p99 ms | errors |');
  console.log('|---|---|---|---|---|---|');
  console.log(row('SQLite (temp file, synchronous = FULL)', sqlite));
  console.log(row('PostgreSQL 15 (local cluster, fsync on)', postgres));
  console.log(
    `\nPostgreSQL / SQLite: ${((postgres.runsPerSec / sqlite.runsPerSec) * 100).toFixed(0)}% of the runs/s, p99 ${(postgres.p99Ms / sqlite.p99Ms).toFixed(2)}×`,
  );
  const d = { xact: after.xact - before.xact, inserted: after.inserted - before.inserted, updated: after.updated - before.updated };
  console.log(
    `PostgreSQL per run (${runs} runs): ${(d.xact / runs).toFixed(2)} statements (= transactions = round trips), ${(d.inserted / runs).toFixed(1)} rows inserted, ${(d.updated / runs).toFixed(1)} rows updated`,
  );
} finally {
  await cluster.stop();
  await executor.close();
}
