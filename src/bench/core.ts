/**
 * Part 2 of the suite: overhead, each figure beside a bare baseline run in the same process.
 * - Scheduler µs per node: 100k calls (reads, writes and searches on 1000 files, one in ten
 *   referencing one of the 50 calls before it) scheduled to the end on the virtual clock under a
 *   per-run and tool limits: `submit` (which plans the batch) plus every start and end. Baseline: a bare
 *   list scheduler (FIFO ready queue, one width limit) over the same DAG.
 * - Flow control (DESIGN §4): 100k calls as four runs in two tenants under a global limit of the same
 *   width, scheduled twice: with priorities 1, 2, 3 and 5, weights 2 and 1, a keyed concurrency on
 *   `write` (1 per path) and `limits.each` on the 50 folders (4 each); and, the baseline, the same runs
 *   without any of it (today's scheduler on the same work). The ratio is what flow control costs per
 *   node (the goal: under 1.10).
 * - Graph build: `buildPlan` at 1k, 10k and 100k calls. Baseline: a graphology graph of the same calls
 *   with only their data edges, known in advance (no references to parse, no hazards, no checks).
 * - Engine overhead per call, with the no-op `echo`: one run of 1000 calls, and 500 runs of 5 calls
 *   one after the other. Baseline: `Promise.all` of the same executor calls.
 * Each figure is the median of its repeats, as CPU time of the process (user + system: what the code
 * costs, whatever else the machine runs) and as wall time (`…Wall`).
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { DirectedGraph } from 'graphology';
import type { CallInput } from '../core/calls.js';
import { MinHeap } from '../core/heap.js';
import { buildPlan } from '../core/plan.js';
import { Scheduler } from '../core/scheduler.js';
import { Simulation } from '../core/simulation.js';
import type { Config } from '../config/types.js';
import { Engine } from '../engine/engine.js';
import type { Executor } from '../executors/types.js';
import { intIn, rng } from './random.js';
import { median } from './stats.js';
import { cost, costAsync, settle, type Cost } from './timing.js';
import { benchConfig, benchConfigYaml, MAX_MS, MIN_MS } from './workloads.js';
import { parseConfig } from '../config/load.js';

export interface CoreOptions {
  /** Nodes in the scheduler measurement (100k). */
  schedulerNodes: number;
  schedulerRepeats: number;
  /** Batch sizes for the build time, each with how many repeats. */
  buildSizes: [n: number, repeats: number][];
  engineRepeats: number;
  engineBatch: number;
  engineSmallRuns: number;
  log?: (line: string) => void;
}

export interface CoreResult {
  /** CPU µs per node, planning included; `…Wall` the same in wall time. */
  usPerNode: number;
  /** Four runs with keyed limits, priorities and weights on (flow control, DESIGN §4). */
  flowUsPerNode: number;
  /** The same four runs with none of it; `flowRatio` is `flowUsPerNode` over it. */
  flowOffUsPerNode: number;
  flowRatio: number;
  usPerNodeWall: number;
  /** Of which `submit` (planning the batch, first dispatch). */
  planUsPerNode: number;
  bareUsPerNode: number;
  schedulerNodes: number;
  buildMs: Record<string, number>;
  buildMsWall: Record<string, number>;
  buildBareMs: Record<string, number>;
  engineUsPerCall: number;
  engineUsPerCallWall: number;
  engineBareUsPerCall: number;
  engineSmallRunUsPerCall: number;
  engineSmallRunUsPerCallWall: number;
  engineSmallRunBareUsPerCall: number;
}

export const SCHED_LIMITS = { perRun: 32, tool: { read: 16, search: 8 }, maxCallsPerRun: 1_000_000 };

/** A big batch; `refs[i]` is the call that call i references, or -1. */
export function bigBatch(n: number, seed: number): { calls: CallInput[]; refs: number[] } {
  const rand = rng(seed);
  const calls: CallInput[] = [];
  const refs: number[] = [];
  for (let i = 0; i < n; i++) {
    const path = `/repo/d${intIn(rand, 0, 49)}/f${intIn(rand, 0, 19)}.ts`;
    const r = rand();
    const args: Record<string, unknown> = { ms: intIn(rand, MIN_MS, MAX_MS) };
    const ref = i > 0 && rand() < 0.1 ? i - 1 - intIn(rand, 0, Math.min(i, 50) - 1) : -1;
    if (ref >= 0) args.in = `\${c${ref}.output.ms}`;
    const tool = r < 0.5 ? 'read' : r < 0.75 ? 'write' : 'search';
    if (tool !== 'search') args.path = path;
    else args.q = `q${i}`;
    calls.push({ id: `c${i}`, tool, args });
    refs.push(ref);
  }
  return { calls, refs };
}

/** The bench config with flow control on (DESIGN §4): keyed limits, weights, priority aging. */
export function flowConfig(): Config {
  const yaml = benchConfigYaml({ ...SCHED_LIMITS, tool: { ...SCHED_LIMITS.tool } });
  const at = yaml.indexOf('executor', yaml.indexOf('- name: write'));
  const keyed = `concurrency: { limit: 1, per: "{path}" }\n    `;
  const flow = `${yaml.slice(0, at)}${keyed}${yaml.slice(at)}  global: ${SCHED_LIMITS.perRun}
  each: { "file:/repo/*": 4 }
  weights: { a: 2 }
  priorityAgingMs: 10000
`;
  return parseConfig(flow, 'builtin:bench-flow');
}

/** The runs of the flow measurement: `n` calls as four runs of priorities 1, 2, 3 and 5 in tenants a and b. */
const FLOW_RUNS = [
  { tenant: 'a', priority: 1 },
  { tenant: 'b', priority: 2 },
  { tenant: 'a', priority: 3 },
  { tenant: 'b', priority: 5 },
] as const;

export function flowBatches(n: number, seed: number): CallInput[][] {
  return FLOW_RUNS.map((_, k) => bigBatch(Math.floor(n / FLOW_RUNS.length), seed + k).calls);
}

/** The baseline of the flow measurement: the bench limits under the same global width, nothing more. */
export function flowOffConfig(): Config {
  return parseConfig(
    `${benchConfigYaml({ ...SCHED_LIMITS, tool: { ...SCHED_LIMITS.tool } })}  global: ${SCHED_LIMITS.perRun}\n`,
    'builtin:bench-flow-off',
  );
}

/**
 * A scheduler with waits explained, as the live engine has them (call.waiting events), on a virtual
 * clock where each call takes its `args.ms`; `ended()` counts the calls that succeeded. Events are
 * counted, not kept: an engine persists its events and lets them go.
 */
function benchSimulation(config: Config): { scheduler: Scheduler; sim: Simulation; ended: () => number } {
  const scheduler = new Scheduler({
    catalog: config.catalog,
    policy: config.policy,
    limits: config.limits,
    defaults: config.defaults,
    explainWaits: true,
  });
  let ended = 0;
  const sim = new Simulation(scheduler, {
    attempt: (s) => ({ durationMs: (s.args as { ms: number }).ms, result: { ok: true, output: { ms: (s.args as { ms: number }).ms } } }),
    record: false,
    onEvent: (e) => {
      if (e.type === 'call.succeeded') ended++;
    },
  });
  return { scheduler, sim, ended: () => ended };
}

/** `on`: with the runs' priorities (their config has the keyed limits and weights, or not). */
export function flowOnce(batches: CallInput[][], config: Config, on: boolean): Cost {
  const { scheduler, sim, ended } = benchSimulation(config);
  const all = batches.reduce((n, b) => n + b.length, 0);
  const t = cost(() => {
    batches.forEach((calls, k) => {
      const r = FLOW_RUNS[k] as (typeof FLOW_RUNS)[number];
      sim.apply(scheduler.submit(0, { runId: `flow${k}`, tenant: r.tenant, ...(on ? { priority: r.priority } : {}), calls }));
    });
    sim.run();
  });
  if (ended() !== all) throw new Error(`scheduler bench (flow): ${ended()} of ${all} calls succeeded`);
  return t;
}

function schedulerOnce(calls: CallInput[], config: Config): { total: Cost; plan: Cost } {
  const { scheduler, sim, ended } = benchSimulation(config);
  const plan = cost(() => scheduler.submit(0, { runId: 'big', tenant: 'bench', calls }));
  const rest = cost(() => {
    sim.apply(plan.value);
    sim.run();
  });
  if (ended() !== calls.length) throw new Error(`scheduler bench: ${ended()} of ${calls.length} calls succeeded`);
  return { total: { wallMs: plan.wallMs + rest.wallMs, cpuMs: plan.cpuMs + rest.cpuMs }, plan };
}

/** The bare baseline: list scheduling of the same DAG, FIFO ready queue, `width` at a time. */
function bareOnce(calls: CallInput[], succ: number[][], width: number): Cost {
  return cost(() => bareSchedule(calls, succ, width));
}

function bareSchedule(calls: CallInput[], succ: number[][], width: number): number {
  const n = calls.length;
  const indeg = new Array<number>(n).fill(0);
  for (const ss of succ) for (const s of ss) indeg[s] = (indeg[s] as number) + 1;
  const ready: number[] = [];
  for (let i = 0; i < n; i++) if (indeg[i] === 0) ready.push(i);
  let head = 0;
  const ends = new MinHeap<[number, number]>((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let running = 0;
  let done = 0;
  while (done < n) {
    while (running < width && head < ready.length) {
      const i = ready[head++] as number;
      ends.push([now + ((calls[i] as CallInput).args as { ms: number }).ms, i]);
      running++;
    }
    const [t, i] = ends.pop() as [number, number];
    now = t;
    running--;
    done++;
    for (const s of succ[i] as number[]) if (--(indeg[s] as number) === 0) ready.push(s);
  }
  return now;
}

export function measureScheduler(
  o: CoreOptions,
): Pick<
  CoreResult,
  'usPerNode' | 'usPerNodeWall' | 'planUsPerNode' | 'bareUsPerNode' | 'schedulerNodes' | 'flowUsPerNode' | 'flowOffUsPerNode' | 'flowRatio'
> {
  const config = benchConfig(SCHED_LIMITS);
  const flow = flowConfig();
  const flowOff = flowOffConfig();
  schedulerOnce(bigBatch(Math.min(2_000, o.schedulerNodes), 7).calls, config); // warm-up
  flowOnce(flowBatches(Math.min(2_000, o.schedulerNodes), 7), flow, true);
  flowOnce(flowBatches(Math.min(2_000, o.schedulerNodes), 7), flowOff, false);
  const { calls } = bigBatch(o.schedulerNodes, o.schedulerNodes);
  const batches = flowBatches(o.schedulerNodes, o.schedulerNodes);
  const flowNodes = batches.reduce((n, b) => n + b.length, 0);
  const totals: Cost[] = [];
  const plans: Cost[] = [];
  const flows: Cost[] = [];
  const flowsOff: Cost[] = [];
  // Interleaved, so that whatever else the machine does weighs on both alike.
  for (let k = 0; k < o.schedulerRepeats; k++) {
    const r = schedulerOnce(calls, config);
    totals.push(r.total);
    plans.push(r.plan);
    flows.push(flowOnce(batches, flow, true));
    flowsOff.push(flowOnce(batches, flowOff, false));
  }
  // The baseline's successor lists are made after: 100k arrays kept alive would tax the scheduler's
  // garbage collections with work that is not its own.
  const { succ } = buildPlan({ calls, tenant: 'bench', catalog: config.catalog, policy: config.policy });
  const bares: Cost[] = [];
  for (let k = 0; k < o.schedulerRepeats; k++) bares.push(bareOnce(calls, succ, SCHED_LIMITS.perRun));
  const per = (xs: Cost[], k: keyof Cost = 'cpuMs') => (median(xs.map((x) => x[k])) * 1000) / calls.length;
  const flowUsPerNode = (median(flows.map((x) => x.cpuMs)) * 1000) / flowNodes;
  const flowOffUsPerNode = (median(flowsOff.map((x) => x.cpuMs)) * 1000) / flowNodes;
  return {
    flowUsPerNode,
    flowOffUsPerNode,
    flowRatio: flowUsPerNode / flowOffUsPerNode,
    usPerNode: per(totals),
    usPerNodeWall: per(totals, 'wallMs'),
    planUsPerNode: per(plans),
    bareUsPerNode: per(bares),
    schedulerNodes: calls.length,
  };
}

export function measureBuild(o: CoreOptions): Pick<CoreResult, 'buildMs' | 'buildMsWall' | 'buildBareMs'> {
  const config = benchConfig(SCHED_LIMITS);
  const plan = (calls: CallInput[]) => buildPlan({ calls, tenant: 'bench', catalog: config.catalog, policy: config.policy });
  for (let i = 0; i < 5; i++) plan(bigBatch(1000, 100 + i).calls); // warm-up
  const buildMs: Record<string, number> = {};
  const buildMsWall: Record<string, number> = {};
  const buildBareMs: Record<string, number> = {};
  for (const [n, repeats] of o.buildSizes) {
    const { calls, refs } = bigBatch(n, n);
    const times: Cost[] = [];
    const bare: Cost[] = [];
    for (let k = 0; k < repeats; k++) {
      const p = cost(() => plan(calls));
      times.push(p);
      if (p.value.diagnostics.length > 0) throw new Error(`build bench: ${p.value.diagnostics[0]?.message}`);
      bare.push(
        cost(() => {
          const g = new DirectedGraph();
          for (const c of calls) g.addNode(c.id);
          refs.forEach((r, i) => {
            if (r >= 0) g.mergeEdge(`c${r}`, `c${i}`);
          });
        }),
      );
    }
    buildMs[String(n)] = median(times.map((t) => t.cpuMs));
    buildMsWall[String(n)] = median(times.map((t) => t.wallMs));
    buildBareMs[String(n)] = median(bare.map((t) => t.cpuMs));
    o.log?.(
      `  build ${n}: ${buildMs[String(n)]?.toFixed(1)} ms CPU, ${buildMsWall[String(n)]?.toFixed(1)} ms wall (bare graph ${buildBareMs[String(n)]?.toFixed(1)} ms)`,
    );
  }
  return { buildMs, buildMsWall, buildBareMs };
}

type EngineFigures =
  | 'engineUsPerCall'
  | 'engineUsPerCallWall'
  | 'engineBareUsPerCall'
  | 'engineSmallRunUsPerCall'
  | 'engineSmallRunUsPerCallWall'
  | 'engineSmallRunBareUsPerCall';

export async function measureEngine(o: CoreOptions, executor: Executor): Promise<Pick<CoreResult, EngineFigures>> {
  const config = benchConfig({ tool: {}, maxCallsPerRun: 1_000_000 });
  const echo = config.catalog.get('echo');
  if (!echo) throw new Error('no echo tool');
  const batch = (n: number, tag: number): CallInput[] =>
    Array.from({ length: n }, (_, i) => ({ id: `e${i}`, tool: 'echo', args: { i, tag } }));
  const bare = (calls: CallInput[]) =>
    Promise.all(
      calls.map((c) =>
        executor.execute({
          runId: 'bare',
          callId: c.id,
          tool: echo,
          args: c.args ?? {},
          attempt: 1,
          signal: new AbortController().signal,
          timeoutMs: 60_000,
        }),
      ),
    );
  const engineRun = async (engine: Engine, calls: CallInput[]) => {
    const { id } = await engine.submit({ calls, tenant: 'bench' });
    const v = await engine.wait(id);
    if (v?.status !== 'succeeded') throw new Error(`engine bench: run ended ${v?.status}`);
  };
  const timeIt = (f: () => Promise<unknown>) => costAsync(f);
  const big: Cost[] = [];
  const bigBare: Cost[] = [];
  const small: Cost[] = [];
  const smallBare: Cost[] = [];
  for (let k = 0; k <= o.engineRepeats; k++) {
    await settle(20);
    const engine = new Engine({ config, executor, retainEndedMs: 0 });
    const calls = batch(o.engineBatch, k);
    const tBig = await timeIt(() => engineRun(engine, calls));
    const tBigBare = await timeIt(() => bare(calls));
    const five = batch(5, k);
    const tSmall = await timeIt(async () => {
      for (let r = 0; r < o.engineSmallRuns; r++) await engineRun(engine, five);
    });
    const tSmallBare = await timeIt(async () => {
      for (let r = 0; r < o.engineSmallRuns; r++) await bare(five);
    });
    await engine.close();
    if (k === 0) continue; // the first round warms up
    big.push(tBig);
    bigBare.push(tBigBare);
    small.push(tSmall);
    smallBare.push(tSmallBare);
  }
  const per = (xs: Cost[], calls: number, k: keyof Cost = 'cpuMs') => (median(xs.map((x) => x[k])) * 1000) / calls;
  const smallCalls = o.engineSmallRuns * 5;
  return {
    engineUsPerCall: per(big, o.engineBatch),
    engineUsPerCallWall: per(big, o.engineBatch, 'wallMs'),
    engineBareUsPerCall: per(bigBare, o.engineBatch),
    engineSmallRunUsPerCall: per(small, smallCalls),
    engineSmallRunUsPerCallWall: per(small, smallCalls, 'wallMs'),
    engineSmallRunBareUsPerCall: per(smallBare, smallCalls),
  };
}

/**
 * `runCore` in a worker thread of its own when running compiled (`npm run bench`): a fresh isolate,
 * whose heap holds nothing of the parts before it. Under tsx (the tests) a worker could not load the
 * TypeScript module, so it runs in this thread.
 */
export async function runCoreIsolated(o: CoreOptions, executor: Executor): Promise<CoreResult> {
  const url = new URL('./core-worker.js', import.meta.url);
  if (!import.meta.url.endsWith('.js') || !existsSync(fileURLToPath(url))) return runCore(o, executor);
  const { log, ...options } = o;
  const worker = new Worker(url, { workerData: options });
  return new Promise<CoreResult>((resolve, reject) => {
    let result: CoreResult | undefined;
    worker.on('message', (m: { log?: string; result?: CoreResult }) => {
      if (m.log !== undefined) log?.(m.log);
      if (m.result) result = m.result;
    });
    worker.on('error', reject);
    worker.on('exit', (code) =>
      result ? resolve(result) : reject(new Error(`the core benchmark's worker exited with code ${code} and no result`)),
    );
  });
}

export async function runCore(o: CoreOptions, executor: Executor): Promise<CoreResult> {
  // The scheduler first, in a heap that holds nothing else yet.
  const sched = measureScheduler(o);
  await settle();
  const build = measureBuild(o);
  o.log?.(
    `  scheduler: ${sched.usPerNode.toFixed(2)} µs/node CPU (${sched.usPerNodeWall.toFixed(2)} wall) over ${sched.schedulerNodes} nodes, of which submit ${sched.planUsPerNode.toFixed(2)}; bare ${sched.bareUsPerNode.toFixed(2)}`,
  );
  o.log?.(
    `  scheduler with flow control (4 runs: keyed limits, priorities, weights): ${sched.flowUsPerNode.toFixed(2)} µs/node CPU; without: ${sched.flowOffUsPerNode.toFixed(2)}; ratio ${sched.flowRatio.toFixed(3)} (goal ≤ 1.10)`,
  );
  await settle();
  const engine = await measureEngine(o, executor);
  o.log?.(
    `  engine: ${engine.engineUsPerCall.toFixed(1)} µs/call CPU in one batch (bare ${engine.engineBareUsPerCall.toFixed(1)}), ${engine.engineSmallRunUsPerCall.toFixed(1)} in 5-call runs (bare ${engine.engineSmallRunBareUsPerCall.toFixed(1)})`,
  );
  return { ...sched, ...build, ...engine };
}
