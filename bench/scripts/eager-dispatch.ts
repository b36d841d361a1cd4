/**
 * Streaming (eager dispatch, DESIGN §10) against waiting for the whole batch.
 *
 * A model writes one tool call every 200 ms (call i is complete at 200·(i+1) ms after the first token);
 * every tool takes 300 ms. The batch is a realistic mix: mostly independent reads of distinct files,
 * and every fourth call a write that uses the previous read's output (a data edge) and writes a file an
 * earlier call read (a conflict). Two ways to run it:
 *
 * - streamed: `open` at the first token, `append` each call the moment it is complete, `seal` after
 *   the last one;
 * - batch: wait for the whole response (the last call complete), then `submit` every call at once.
 *
 * End-to-end time is from the first token to the last result. Part 1 runs on the virtual clock (the
 * pure scheduler and `Simulation`, exact and noise-free) for N = 5, 10, 20; part 2 runs the real
 * engine with real timers and the builtin `sleep` executor for a smaller N, so it includes every real
 * cost (timers, executors, event handling) and the machine's noise.
 *
 *   npx tsx bench/scripts/eager-dispatch.ts [--real-n 5] [--no-real]
 */
import type { CallInput } from '../../src/core/calls.js';
import { Scheduler } from '../../src/core/scheduler.js';
import { Simulation } from '../../src/core/simulation.js';
import { Engine } from '../../src/engine/engine.js';
import { STREAM_CONFIG as CONFIG, streamedBatch, TOOL_MS } from './streamed-batch.js';

const EVERY_MS = 200;

const arrival = (i: number) => EVERY_MS * (i + 1);

// ---- part 1: the virtual clock -------------------------------------------------------------------

function simulate(calls: CallInput[], streamed: boolean): { endMs: number; status: string; edges: number } {
  const s = new Scheduler({ catalog: CONFIG.catalog, policy: CONFIG.policy, limits: CONFIG.limits, defaults: CONFIG.defaults });
  const sim = new Simulation(s, {
    attempt: (start) => ({ durationMs: start.args.ms as number, result: { ok: true, output: { ms: start.args.ms } } }),
  });
  const last = arrival(calls.length - 1);
  if (streamed) {
    sim.at(0, (now) => s.submit(now, { runId: 'r', tenant: 't', calls: [], open: true }));
    calls.forEach((c, i) => {
      sim.at(arrival(i), (now) => s.append(now, 'r', [c]));
    });
    sim.at(last, (now) => s.seal(now, 'r'));
  } else {
    sim.at(last, (now) => s.submit(now, { runId: 'r', tenant: 't', calls }));
  }
  sim.run();
  const done = sim.events.find((e) => e.type === 'run.completed');
  if (done?.type !== 'run.completed') throw new Error('the run did not complete');
  let edges = 0;
  for (const e of sim.events)
    if (e.type === 'run.started' || e.type === 'run.calls_added' || e.type === 'run.sealed') edges += e.data.edges.length;
  return { endMs: done.at, status: done.data.status, edges };
}

function pct(saved: number, of: number): string {
  return `${((100 * saved) / of).toFixed(0)}%`;
}

function row(cells: (string | number)[]): string {
  return `| ${cells.join(' | ')} |`;
}

console.log(`# Streaming vs whole batch: a call every ${EVERY_MS} ms, tools take ${TOOL_MS} ms\n`);
console.log('## Virtual clock (exact)\n');
console.log(
  row([
    'N',
    'writes',
    'last call complete',
    'streamed: last result',
    'batch: last result',
    'tail after the last call (streamed / batch)',
    'saving',
    'status',
  ]),
);
console.log(row(['---:', '---:', '---:', '---:', '---:', '---:', '---:', '---']));
for (const n of [5, 10, 20]) {
  const calls = streamedBatch(n);
  const st = simulate(calls, true);
  const bt = simulate(calls, false);
  if (st.status !== 'succeeded' || bt.status !== 'succeeded') throw new Error(`N=${n}: ${st.status} / ${bt.status}`);
  if (st.edges !== bt.edges) throw new Error(`N=${n}: the graphs differ (${st.edges} vs ${bt.edges} edges)`);
  const writes = calls.filter((c) => c.tool === 'write_file').length;
  const last = arrival(n - 1);
  console.log(
    row([
      n,
      writes,
      `${last} ms`,
      `${st.endMs} ms`,
      `${bt.endMs} ms`,
      `${st.endMs - last} / ${bt.endMs - last} ms`,
      `${bt.endMs - st.endMs} ms (${pct(bt.endMs - st.endMs, bt.endMs)})`,
      st.status,
    ]),
  );
}

// ---- part 2: the real engine, real timers ----------------------------------------------------------

const argv = process.argv.slice(2);
const realAt = argv.indexOf('--real-n');
const REAL_N = realAt >= 0 ? Number(argv[realAt + 1]) : 5;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Plays the model: resolves `deliver(i)` at the first token + 200·(i+1) ms, measured from `t0`. */
async function play(calls: CallInput[], t0: number, deliver: (i: number) => void): Promise<void> {
  for (let i = 0; i < calls.length; i++) {
    await sleep(Math.max(0, t0 + arrival(i) - performance.now()));
    deliver(i);
  }
}

async function realRun(calls: CallInput[], streamed: boolean): Promise<{ ms: number; status: string }> {
  const engine = new Engine({ config: CONFIG });
  try {
    const t0 = performance.now();
    let runId: string;
    if (streamed) {
      const open = engine.open({ tenant: 't' });
      runId = open.id;
      await play(calls, t0, (i) => open.add(calls[i] as CallInput));
      open.seal();
    } else {
      await play(calls, t0, () => {});
      runId = (await engine.submit({ tenant: 't', calls })).id;
    }
    const view = await engine.wait(runId);
    return { ms: performance.now() - t0, status: view?.status ?? 'lost' };
  } finally {
    await engine.close();
  }
}

if (!argv.includes('--no-real')) {
  console.log(`\n## Real engine, real timers (builtin sleep executor), N = ${REAL_N}, 3 rounds\n`);
  console.log(row(['round', 'last call complete', 'streamed: last result', 'batch: last result', 'saving']));
  console.log(row(['---:', '---:', '---:', '---:', '---:']));
  const calls = streamedBatch(REAL_N);
  const ideal = { streamed: simulate(calls, true).endMs, batch: simulate(calls, false).endMs };
  for (let round = 1; round <= 3; round++) {
    const st = await realRun(calls, true);
    const bt = await realRun(calls, false);
    if (st.status !== 'succeeded' || bt.status !== 'succeeded') throw new Error(`real N=${REAL_N}: ${st.status} / ${bt.status}`);
    console.log(
      row([
        round,
        `${arrival(REAL_N - 1)} ms`,
        `${st.ms.toFixed(0)} ms`,
        `${bt.ms.toFixed(0)} ms`,
        `${(bt.ms - st.ms).toFixed(0)} ms (${pct(bt.ms - st.ms, bt.ms)})`,
      ]),
    );
  }
  console.log(
    `\n(virtual-clock figures for the same N: streamed ${ideal.streamed} ms, batch ${ideal.batch} ms; the real ones add timer and scheduling latency)`,
  );
}
