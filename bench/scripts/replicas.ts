/**
 * The replica benchmarks (DESIGN §12; `npm run bench:replicas -- [--kills 5] [--clients 12]
 * [--seconds 15] [--rounds 2] [--sse-runs 40] [--only takeover,sse,throughput,handoff] [--write]`):
 * takeover time over repeated kills (the default lease and a short one), append-to-SSE latency on the
 * owner and on another replica, runs per second on 1, 2 and 3 replicas under the same client load
 * (rounds alternate the order), the round trip of an ask for a cluster-wide permit meanwhile, and the
 * hand-off of a limited slot between replicas (replica-bench.ts). All on one throwaway PostgreSQL.
 *
 * Prints markdown tables; `--write` also puts them into bench/RESULTS.md between the
 * `<!-- replicas:begin -->` and `<!-- replicas:end -->` markers (under "Several replicas").
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { startPostgres } from '../../src/bench/postgres-cluster.js';
import { limitHandoff, sseLatency, takeover, throughput, type ThroughputResult } from '../../src/bench/replica-bench.js';
import { quantile } from '../../src/bench/stats.js';

const { values } = parseArgs({
  options: {
    kills: { type: 'string', default: '5' },
    clients: { type: 'string', default: '12' },
    seconds: { type: 'string', default: '15' },
    rounds: { type: 'string', default: '2' },
    'sse-runs': { type: 'string', default: '40' },
    'short-lease': { type: 'string', default: '2000' },
    'default-lease': { type: 'string', default: '10000' },
    only: { type: 'string', default: 'takeover,sse,throughput,handoff' },
    write: { type: 'boolean', default: false },
  },
});
const n = (s: string | undefined) => Number(s);
const only = new Set((values.only as string).split(','));
const log = (s: string) => console.error(s);
const f0 = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : '–');
const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '–');
const load = () =>
  loadavg()
    .map((x) => x.toFixed(1))
    .join(' / ');

const lines: string[] = [];
const out = (s = '') => {
  lines.push(s);
  console.log(s);
};

const started = new Date();
const loadBefore = load();
const pgc = await startPostgres();
try {
  out(
    `\`npm run bench:replicas\` on ${started.toISOString()}: Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model.trim() ?? 'CPU'}; replicas are \`toolgraph serve\` processes (dist/), on one throwaway PostgreSQL 15 (fsync on), the tools an HTTP server in the bench process; load average before ${loadBefore} (1 / 5 / 15 min).`,
  );
  out();
  if (only.has('takeover')) {
    const rows: string[] = [];
    for (const leaseMs of [n(values['default-lease']), n(values['short-lease'])]) {
      log(`takeover, lease ${leaseMs} ms…`);
      const r = await takeover(pgc, leaseMs, n(values.kills), log);
      rows.push(
        `| ${leaseMs} | ${r.kills.length} kills, ${r.runs.length} runs | ${f0(quantile(r.runs, 0.5))} | ${f0(Math.max(...r.runs))} | ${f0(leaseMs + 2000)} | ${r.kills.map(f0).join(', ')} | ${r.extra} |`,
      );
    }
    out('**Takeover** (kill -9 of a replica running held idempotent calls → each call re-run from another replica, at the tool):');
    out();
    out('| store.leaseMs | samples | p50 ms | max ms | bound (lease + 2 s) | per kill (slowest run), ms | runs handed over again |');
    out('|---|---|---|---|---|---|---|');
    for (const r of rows) out(r);
    out();
  }
  if (only.has('sse')) {
    log('append-to-SSE latency…');
    const rounds: { owner: number[]; other: number[] }[] = [];
    for (let k = 0; k < n(values.rounds); k++) rounds.push(await sseLatency(pgc, n(values['sse-runs']), 4));
    out(
      "**Append-to-SSE latency** (a tool answers → its `call.succeeded` arrives on `/v1/runs/{id}/events`; runs of 4 chained calls, 4 runs at a time; from the tool's answer, so the owner's commit is included):",
    );
    out();
    out('| stream opened on | round | events | p50 ms | p99 ms | max ms |');
    out('|---|---|---|---|---|---|');
    rounds.forEach((r, k) => {
      out(
        `| the owner | ${k + 1} | ${r.owner.length} | ${f1(quantile(r.owner, 0.5))} | ${f1(quantile(r.owner, 0.99))} | ${f1(Math.max(...r.owner))} |`,
      );
      out(
        `| another replica | ${k + 1} | ${r.other.length} | ${f1(quantile(r.other, 0.5))} | ${f1(quantile(r.other, 0.99))} | ${f1(Math.max(...r.other))} |`,
      );
    });
    out();
  }
  if (only.has('throughput')) {
    const clients = n(values.clients);
    const seconds = n(values.seconds);
    const results: ThroughputResult[] = [];
    for (let round = 0; round < n(values.rounds); round++) {
      const order = round % 2 === 0 ? [0, 1, 2, 3] : [3, 2, 1, 0];
      for (const replicas of order) {
        log(`throughput, ${replicas || 'SQLite, 1'} replica(s), round ${round + 1}…`);
        results.push(await throughput(pgc, replicas, clients, seconds));
        log(`  ${results[results.length - 1]!.runsPerSec.toFixed(1)} runs/s (load ${load()})`);
      }
    }
    out(
      `**Runs per second** (${clients} closed-loop clients round-robin over the replicas, each run 3 independent http calls of 5 ms, submitted with \`waitMs\` so one request waits for the end; ${seconds} s measured after 3 s of warm-up; rounds alternate the order). Beside it, **permit acquisition**: an ask for a permit no limit refuses, made every 100 ms through cluster/permits.ts under a lease of its own while the load runs (the wait for the cluster's one-at-a-time lock included):`,
    );
    out();
    out('| replicas | round | runs/s | request p50 / p99 ms | errors | PostgreSQL commits per run | permit ask p50 / p99 ms (asks) |');
    out('|---|---|---|---|---|---|---|');
    for (const replicas of [0, 1, 2, 3]) {
      results
        .filter((r) => r.replicas === replicas)
        .forEach((r, k) => {
          out(
            `| ${replicas === 0 ? '1, SQLite (no cluster)' : replicas} | ${k + 1} | ${f1(r.runsPerSec)} | ${f0(quantile(r.latency, 0.5))} / ${f0(quantile(r.latency, 0.99))} | ${r.errors} | ${replicas === 0 ? '–' : f1(r.xactPerRun)} | ${replicas === 0 ? '–' : `${f1(quantile(r.permitAsks, 0.5))} / ${f1(quantile(r.permitAsks, 0.99))} (${r.permitAsks.length})`} |`,
          );
        });
    }
    out();
  }
  if (only.has('handoff')) {
    log('limit hand-off…');
    const gaps: number[] = [];
    const same: number[] = [];
    for (let k = 0; k < n(values.rounds); k++) {
      const r = await limitHandoff(pgc, 45);
      gaps.push(...r.gaps);
      same.push(...r.sameReplica);
    }
    out(
      "**Limit hand-off** (a tool limited to 1 at a time, 45 runs of one 30 ms call submitted at once over 3 replicas: from one attempt's end at the tool to the next one's start; the permit given back, NOTIFY, the waiting replica's ask, its dispatch):",
    );
    out();
    out('| next attempt from | samples | p50 ms | p99 ms | max ms |');
    out('|---|---|---|---|---|');
    out(`| another replica | ${gaps.length} | ${f1(quantile(gaps, 0.5))} | ${f1(quantile(gaps, 0.99))} | ${f1(Math.max(...gaps))} |`);
    out(`| the same replica | ${same.length} | ${f1(quantile(same, 0.5))} | ${f1(quantile(same, 0.99))} | ${f1(Math.max(...same))} |`);
    out();
  }
  out(`Load average after: ${load()}; ${((Date.now() - started.getTime()) / 1000).toFixed(0)} s in all.`);
} finally {
  await pgc.stop();
}

if (values.write) {
  const file = 'bench/RESULTS.md';
  const begin = '<!-- replicas:begin -->';
  const end = '<!-- replicas:end -->';
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const block = `${begin}\n${lines.join('\n')}\n${end}`;
  const next =
    text.includes(begin) && text.includes(end)
      ? text.slice(0, text.indexOf(begin)) + block + text.slice(text.indexOf(end) + end.length)
      : `${text.trimEnd()}\n\n## Several replicas (issue #17)\n\n${block}\n`;
  writeFileSync(file, next);
  log(`written into ${file}`);
}
