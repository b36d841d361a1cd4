/**
 * The HTTP path of two builds in ONE process (issue #15's "the HTTP ratio does not drop"): a server
 * from each build's dist/ (its own Service, engine and SQLite file), loaded in turn by the same
 * closed-loop clients (8, keep-alive, 5-call echo batches with waitMs), rounds alternating the order.
 * Reports runs/s per build and the median of the paired ratios (after ÷ before). Drift of a busy
 * machine hits both alike, where two runs of the suite minutes apart do not.
 *
 *   BEFORE=/path/to/old/checkout AFTER=/path/to/this/checkout ROUNDS=12 MS=2000 node src/bench/scripts/compare-http.mjs
 *
 * Each checkout must be built (`npm run build`) and have its node_modules.
 */
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const ROUNDS = Number(process.env.ROUNDS ?? 10),
  MS = Number(process.env.MS ?? 2000),
  CLIENTS = Number(process.env.CLIENTS ?? 8);
const BODY = JSON.stringify({
  calls: Array.from({ length: 5 }, (_, i) => ({ id: `c${i + 1}`, tool: 'echo', args: { n: i + 1 } })),
  waitMs: 5000,
});
async function server(root, label) {
  const { buildServer } = await import(`${root}/dist/api/server.js`);
  const svc = await import(`${root}/dist/api/service.js`);
  const { openSqliteStore } = await import(`${root}/dist/store/sqlite.js`);
  const { benchConfig } = await import(`${root}/dist/bench/workloads.js`);
  const { createBuiltinExecutor } = await import(`${root}/dist/executors/builtin.js`);
  const dir = mkdtempSync(join(tmpdir(), `ab-${label}-`));
  const store = openSqliteStore(join(dir, 'bench.db'));
  const config = benchConfig({ tool: {}, maxCallsPerRun: 1000 });
  const executor = createBuiltinExecutor();
  const service = svc.openService ? await svc.openService({ config, store, executor }) : new svc.Service({ config, store, executor });
  const app = buildServer({ service });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    label,
    url: new URL(`http://127.0.0.1:${app.server.address().port}/v1/runs`),
    close: async () => {
      await app.close();
      await (service.close ? service.close() : service.engine.close());
      await store.close?.();
      await executor.close?.();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
function post(agent, url) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(BODY) },
      },
      (res) => {
        let t = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (t += d));
        res.on('end', () => resolve(res.statusCode === 201 && JSON.parse(t).status === 'succeeded'));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(BODY);
  });
}
async function load(url, ms) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
  let n = 0,
    bad = 0;
  const end = performance.now() + ms;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (performance.now() < end) {
        if (await post(agent, url)) n++;
        else bad++;
      }
    }),
  );
  agent.destroy();
  return { perSec: n / ((performance.now() - t0) / 1000), bad };
}
const resolveRoot = (r) => (r.startsWith('/') ? r : `${process.cwd()}/${r}`);
const before = await server(resolveRoot(process.env.BEFORE ?? '.'), 'before');
const after = await server(resolveRoot(process.env.AFTER ?? '.'), 'after');
for (const s of [before, after]) await load(s.url, 1500);
const rows = { before: [], after: [] };
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 ? [after, before] : [before, after];
  for (const s of order) {
    await new Promise((z) => setTimeout(z, 100));
    const l = await load(s.url, MS);
    rows[s.label].push(l.perSec);
    if (l.bad) console.log('bad', s.label, l.bad);
  }
  console.log(
    `round ${r + 1}: before ${rows.before[r].toFixed(0)} after ${rows.after[r].toFixed(0)} runs/s  (${(rows.after[r] / rows.before[r]).toFixed(3)})  load ${(await import('node:os')).loadavg()[0].toFixed(2)}`,
  );
}
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ratios = rows.after.map((x, i) => x / rows.before[i]);
console.log(
  `median runs/s: before ${med(rows.before).toFixed(0)}, after ${med(rows.after).toFixed(0)}; after÷before median ${med(ratios).toFixed(3)} (range ${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)})`,
);
await before.close();
await after.close();
process.exit(0);
