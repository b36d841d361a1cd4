/**
 * The chaos script of several replicas (DESIGN §12), not a test: `npm run chaos -- [--replicas 3]
 * [--clients 8] [--seconds 60] [--seed N] [--lease-ms 2000] [--no-pause] [--kill-every 4000-10000]
 * [--settle-seconds 120] [--logs DIR]`. Runs N replicas on a throwaway PostgreSQL and M clients for a bounded time,
 * kills (-9) and restarts replicas at random and pauses one past its lease (chaos.ts), then checks every
 * invariant from the tool server's log and the event logs (chaos-check.ts). Prints what happened and
 * each violation count; exits 1 if any is not 0. Progress goes to stderr, the report to stdout.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { runChaos, type ChaosRecord } from '../../src/bench/chaos.js';
import { checkChaos } from '../../src/bench/chaos-check.js';

const { values } = parseArgs({
  options: {
    replicas: { type: 'string', default: '3' },
    clients: { type: 'string', default: '8' },
    seconds: { type: 'string', default: '60' },
    seed: { type: 'string' },
    'lease-ms': { type: 'string', default: '2000' },
    'no-pause': { type: 'boolean', default: false },
    'kill-every': { type: 'string', default: '4000-10000' },
    'settle-seconds': { type: 'string', default: '120' },
    logs: { type: 'string' },
  },
});

const int = (name: string, s: string, min: number): number => {
  const n = Number(s);
  if (!Number.isInteger(n) || n < min) {
    console.error(`--${name} must be an integer ≥ ${min}, not ${s}`);
    process.exit(2);
  }
  return n;
};
const [killMin, killMax] = (values['kill-every'] as string).split('-').map((x) => int('kill-every', x, 100));
const seed = values.seed === undefined ? Date.now() % 1_000_000 : int('seed', values.seed, 0);
const opts = {
  replicas: int('replicas', values.replicas as string, 2),
  clients: int('clients', values.clients as string, 1),
  seconds: int('seconds', values.seconds as string, 5),
  seed,
  leaseMs: int('lease-ms', values['lease-ms'] as string, 500),
  pause: !values['no-pause'],
  killEveryMs: [killMin as number, (killMax ?? killMin) as number] as [number, number],
  settleMs: int('settle-seconds', values['settle-seconds'] as string, 1) * 1000,
  log: (line: string) => console.error(`[chaos] ${line}`),
};

let rec: ChaosRecord | undefined;
let failed = false;
try {
  rec = await runChaos(opts);
  const r = await checkChaos(rec);
  const faults = rec.faults.map(
    (f) =>
      `${f.kind} r${f.replica} at ${((f.from - rec!.startedAt) / 1000).toFixed(1)} s${f.to ? ` (back after ${((f.to - f.from) / 1000).toFixed(1)} s)` : ''}`,
  );
  const refused = [...rec.refused].map(([code, n]) => `${n} × ${code}`).join(', ') || 'none';
  const out = [
    `chaos: ${opts.replicas} replicas, ${opts.clients} clients, ${opts.seconds} s, seed ${seed}, lease ${opts.leaseMs} ms, kills every ${opts.killEveryMs.join('–')} ms${opts.pause ? ', one pause past the lease' : ''}`,
    '',
    `runs accepted            ${r.accepted}`,
    `runs in the database     ${r.runsInDb} (every submission stored, answered or not)`,
    `runs ended               ${r.ended} (${Object.entries(r.statuses)
      .map(([s, n]) => `${s} ${n}`)
      .join(
        ', ',
      )})${rec.settledMs === undefined ? ` — NOT all within ${opts.settleMs / 1000} s` : `, the last ${(rec.settledMs / 1000).toFixed(1)} s after the clients stopped`}`,
    `submissions refused      ${refused}; unanswered (replica died or paused) ${rec.unanswered}`,
    `cancels sent elsewhere   ${r.cancelsSent}`,
    `attempts at the tools    ${r.attempts} (${r.reruns} re-runs)`,
    `kills (-9)               ${r.kills}`,
    `pauses past the lease    ${r.pauses} (${r.staleOpen} attempts of the paused replica were open: counted up to the pause)`,
    `takeovers (runs)         ${r.takeovers}`,
    `leases lost              ${r.leaseLosses}${Object.entries(r.lossReasons)
      .map(([why, k]) => `\n                           ${k} × ${why}`)
      .join('')}`,
    `most at once             ${Object.entries(r.reached)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
    `faults                   ${faults.join('; ') || 'none'}`,
    '',
    'violations (each must be 0):',
  ];
  let total = 0;
  const labels: Record<string, string> = {
    acceptedLost: 'accepted runs missing from the database',
    notEnded: 'runs not ended',
    seqGaps: 'event logs with a gap in seq',
    runEnd: 'ended runs without exactly one run.completed, last',
    staleAppends: "a call's attempt ended after a newer one started",
    toolLimit: `tool limit exceeded (lim_a ≤ 2)`,
    tenantLimit: 'tenant limit exceeded (capped ≤ 3)',
    resourceLimit: 'resource limit exceeded (res:* ≤ 2)',
    resourceLock: 'writers of one res:{name} overlapped',
    globalLock: 'global-scope lock: writers overlapped (or a reader and a writer)',
    activeRuns: 'maxActiveRunsPerTenant exceeded (4)',
    nonIdempotentTwice: 'non-idempotent calls run twice',
    keyChanged: 'idempotent re-runs with another Idempotency-Key',
    cancelLost: 'cancels answered 202 on a running run that did not end it cancelled',
    crashes: 'replicas that exited on their own (a crash; started again)',
  };
  for (const [name, v] of Object.entries(r.violations)) {
    total += v.count;
    out.push(`  ${String(v.count).padStart(5)}  ${labels[name] ?? name}`);
    for (const e of v.examples) out.push(`           e.g. ${e}`);
  }
  if (rec.settledMs === undefined) total++;
  out.push('', total === 0 ? 'OK: no violation' : `FAILED: ${total} violation(s)`);
  console.log(out.join('\n'));
  if (values.logs) {
    mkdirSync(values.logs, { recursive: true });
    const seen = new Map<number, number>();
    for (const { replica, child } of rec.children) {
      const k = (seen.get(replica) ?? 0) + 1;
      seen.set(replica, k);
      writeFileSync(path.join(values.logs, `r${replica}-${k}.log`), child.output());
    }
    console.error(`[chaos] replica logs in ${values.logs}`);
  }
  failed = total > 0;
} catch (err) {
  console.error(err);
  failed = true;
} finally {
  await rec?.cluster.close();
}
process.exit(failed ? 1 : 0);
