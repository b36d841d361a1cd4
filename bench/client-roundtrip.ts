/**
 * Client-run tools over HTTP (DESIGN §17): what a call of a `kind: client` tool costs against the same
 * call of an `http` tool whose endpoint answers at once, both on loopback, one server in this process
 * (SQLite file store, as `toolgraph serve` runs by default), runs of one call, one at a time.
 *
 * - round trip: from the call's `call.started` to its `call.succeeded`, both as the engine publishes
 *   them (after they are stored), timed in this process. For `http` that is toolgraph's POST to the tool
 *   and its answer; for `client` it is the agent hearing of the call, running its handler and posting
 *   the result, and the engine taking it.
 * - run: the agent's view, from submitting the batch to holding the ended run.
 *
 * Three agents: `http` (the baseline: `submit(…, { wait: true })`); `client (run)`, the typed client's
 * `run(batch, { handlers })`, which follows the run's event stream; `client (poll)`, the bare REST loop:
 * submit, `GET /work?waitMs=` until the call is listed, `POST …/result`, then wait for the end. Blocks
 * of each agent alternate, so drift of a busy machine hits all three. Prints p50 and p99 (ms) and the
 * ratio of each p50 to the baseline's.
 *
 * Run: `npm run bench:client [-- --calls 300 --block 25]`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { buildServer } from '../src/api/server.js';
import { openService } from '../src/api/service.js';
import { quantile } from '../src/bench/stats.js';
import { ToolgraphClient } from '../src/client/index.js';
import { parseConfig } from '../src/config/load.js';
import { openStore, parseStoreValue } from '../src/store/select.js';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '300' }, block: { type: 'string', default: '25' } } });
const CALLS = Number(values.calls);
const BLOCK = Number(values.block);

/** A tool endpoint that answers at once with the args it got. */
async function toolServer(): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { args: unknown };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body.args));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return { server, url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/echo` };
}

const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-bench-client-'));
const tool = await toolServer();
const config = parseConfig(
  `
tools:
  - { name: http_echo, reads: [], writes: [], executor: { kind: http, url: "${tool.url}" } }
  - { name: client_echo, reads: [], writes: [], executor: { kind: client } }
`,
  'bench.yaml',
  { env: {}, baseDir: dir },
);
const store = await openStore(parseStoreValue(path.join(dir, 'toolgraph.db'), 'db'), {});
const service = await openService({ config, store });
await service.recover();
const app = buildServer({ service });
await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
const baseUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
const tg = new ToolgraphClient({ baseUrl });

// The round trip as the engine sees it: call.started → call.succeeded, per run.
const startedAt = new Map<string, number>();
const roundTrips = new Map<string, number>();
const ended = new Map<string, () => void>();
service.engine.onEvent((e) => {
  if (e.type === 'call.started') startedAt.set(e.runId, performance.now());
  else if (e.type === 'call.succeeded') roundTrips.set(e.runId, performance.now() - (startedAt.get(e.runId) ?? Number.NaN));
  else if (e.type === 'run.completed') ended.get(e.runId)?.();
});

type Agent = (i: number) => Promise<string>;

const agents: Record<string, Agent> = {
  http: async (i) => (await tg.submit({ calls: [{ id: 'c', tool: 'http_echo', args: { i } }] }, { wait: true })).id,
  'client (run)': async (i) =>
    (await tg.run({ calls: [{ id: 'c', tool: 'client_echo', args: { i } }] }, { handlers: { client_echo: (a) => a } })).id,
  'client (poll)': async (i) => {
    const run = await tg.submit({ calls: [{ id: 'c', tool: 'client_echo', args: { i } }] });
    const done = new Promise<void>((resolve) => ended.set(run.id, resolve));
    let items = (await tg.work(run.id, { waitMs: 10_000 })).items;
    while (items.length === 0) items = (await tg.work(run.id, { waitMs: 10_000 })).items;
    const w = items[0] as (typeof items)[number];
    await tg.postResult(run.id, w.callId, { token: w.token, output: w.args });
    await done;
    ended.delete(run.id);
    return run.id;
  },
};

const samples: Record<string, { trip: number[]; run: number[] }> = Object.fromEntries(
  Object.keys(agents).map((k) => [k, { trip: [] as number[], run: [] as number[] }]),
);

// Warm-up, then alternating blocks.
for (const agent of Object.values(agents)) for (let i = 0; i < 20; i++) await agent(i);
const load = loadavg()[0] as number;
let i = 0;
for (let done = 0; done < CALLS; done += BLOCK) {
  const order = Object.keys(agents);
  if ((done / BLOCK) % 2 === 1) order.reverse();
  for (const name of order) {
    const agent = agents[name] as Agent;
    for (let k = 0; k < Math.min(BLOCK, CALLS - done); k++) {
      const t0 = performance.now();
      const runId = await agent(i++);
      samples[name]?.run.push(performance.now() - t0);
      samples[name]?.trip.push(roundTrips.get(runId) ?? Number.NaN);
      roundTrips.delete(runId);
      startedAt.delete(runId);
    }
  }
}

const ms = (x: number) => x.toFixed(2).padStart(7);
const base = samples.http as { trip: number[]; run: number[] };
console.log(`client-run tools over HTTP: ${CALLS} runs of one call per agent, one at a time; load average ${load.toFixed(2)} (2 cores)`);
console.log(
  `${'agent'.padEnd(15)} ${'trip p50'.padStart(9)} ${'trip p99'.padStart(9)} ${'x http'.padStart(7)}   ${'run p50'.padStart(8)} ${'run p99'.padStart(8)} ${'x http'.padStart(7)}`,
);
for (const [name, s] of Object.entries(samples)) {
  const tripRatio = quantile(s.trip, 0.5) / quantile(base.trip, 0.5);
  const runRatio = quantile(s.run, 0.5) / quantile(base.run, 0.5);
  console.log(
    `${name.padEnd(15)} ${ms(quantile(s.trip, 0.5))}ms ${ms(quantile(s.trip, 0.99))}ms ${tripRatio.toFixed(2).padStart(7)}   ${ms(quantile(s.run, 0.5))}ms ${ms(quantile(s.run, 0.99))}ms ${runRatio.toFixed(2).padStart(7)}`,
  );
}

await app.close();
await service.close();
await store.close();
tool.server.close();
rmSync(dir, { recursive: true, force: true });
