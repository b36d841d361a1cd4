/**
 * The scheduler figure of two builds in ONE process (the suite's 100k-node batch under its limits,
 * virtual clock, CPU µs per node), runs alternating between the builds; each build explains waits
 * as its own bench does. Reports the medians and the median of the paired ratios (B ÷ A).
 *
 *   A=/path/to/old/checkout B=/path/to/this/checkout PAIRS=30 node bench/compare/compare-scheduler.mjs
 *
 * Each checkout must be built (`npm run build`). `A_EXPLAIN` / `B_EXPLAIN` (0 or 1) override whether
 * that side explains waits: with A a copy of B's build (its `dist/`, `src/bench/core.ts` and a link to
 * its `node_modules`), `A_EXPLAIN=0 B_EXPLAIN=1` is what explaining costs in one build. Not `A=. B=.`:
 * both sides would share one set of modules, and the JIT's type feedback of each would mix both.
 */
const abs = (/** @type {string} */ r) => (r.startsWith('/') ? r : `${process.cwd()}/${r}`);
const A = abs(process.env.A ?? '.'),
  B = abs(process.env.B ?? '.');
const N = Number(process.env.N ?? 100000),
  PAIRS = Number(process.env.PAIRS ?? 10);
/**
 * One build's figure, as a function that measures one run (CPU µs per node).
 * @param {string} root the checkout
 * @param {string | undefined} override '0' or '1': whether it explains waits
 * @returns {Promise<() => number>}
 */
async function load(root, override) {
  const { Scheduler } = await import(`${root}/dist/core/scheduler.js`);
  const { Simulation } = await import(`${root}/dist/core/simulation.js`);
  const { bigBatch, SCHED_LIMITS } = await import(`${root}/dist/bench/core.js`);
  const { benchConfig } = await import(`${root}/dist/bench/workloads.js`);
  const config = benchConfig(SCHED_LIMITS);
  const explain =
    override !== undefined
      ? override === '1'
      : (await import('node:fs')).readFileSync(`${root}/src/bench/core.ts`, 'utf8').includes('explainWaits: true');
  const calls = bigBatch(N, N).calls;
  return () => {
    const scheduler = new Scheduler({
      catalog: config.catalog,
      policy: config.policy,
      limits: config.limits,
      defaults: config.defaults,
      explainWaits: explain,
    });
    const sim = new Simulation(scheduler, {
      attempt: (/** @type {{ args: { ms: number } }} */ s) => ({ durationMs: s.args.ms, result: { ok: true, output: { ms: s.args.ms } } }),
      record: false,
    });
    const t0 = process.cpuUsage();
    sim.apply(scheduler.submit(0, { runId: 'big', tenant: 'bench', calls }));
    sim.run();
    const d = process.cpuUsage(t0);
    return (d.user + d.system) / N;
  };
}
const a = await load(A, process.env.A_EXPLAIN),
  b = await load(B, process.env.B_EXPLAIN);
a();
b();
/** @type {number[]} */
const ra = [];
/** @type {number[]} */
const rb = [];
for (let p = 0; p < PAIRS; p++) {
  if (p % 2) {
    rb.push(b());
    ra.push(a());
  } else {
    ra.push(a());
    rb.push(b());
  }
}
const med = (/** @type {number[]} */ xs) => /** @type {number} */ ([...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]);
const rat = rb.map((x, i) => x / /** @type {number} */ (ra[i]));
console.log(
  `A ${med(ra).toFixed(2)} B ${med(rb).toFixed(2)} µs/node; B/A median ${med(rat).toFixed(3)} (${Math.min(...rat).toFixed(3)}–${Math.max(...rat).toFixed(3)})  load ${(await import('node:os')).loadavg()[0]?.toFixed(1)}`,
);
