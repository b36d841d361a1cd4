/**
 * The chaos run of several replicas (DESIGN §12; `npm run chaos`, scripts/chaos.ts): N replicas on one
 * throwaway PostgreSQL (replicas.ts), M clients that submit random runs to random replicas and cancel
 * some through another replica, while replicas are killed (-9) and restarted at random and, once, one
 * is paused (SIGSTOP) past its lease. Then every replica is started again and every run is waited for;
 * chaos-check.ts checks the invariants from the tool server's log and the event logs.
 *
 * The workload: tenants `a`, `b` and `capped` (a tenant limit of 3); tools with a limit (`lim_a`: 2),
 * a resource limit (`res_c` writes `res:{name}` of global scope, `res:*`: 2), global-scope lock writers
 * and readers (`lock_w`, `lock_r` on `file:/shared`), idempotent and non-idempotent slow tools
 * (`slow_idem`, `slow_once`), at most `maxActiveRunsPerTenant` (4) active runs per tenant. Every
 * call's args carry its tenant (`t`) and its duration (`ms`), so the tool server's log says both.
 */
import { intIn, pick, rng } from './random.js';
import { startCluster, type TestCluster } from './replicas.js';
import type { ServerChild } from './child.js';

export const CHAOS_LIMITS = { lim_a: 2, capped: 3, res: 2, maxActiveRunsPerTenant: 4 } as const;
export const IDEMPOTENT = new Set(['lim_a', 'free_b', 'res_c', 'lock_w', 'lock_r', 'slow_idem']);
const TOOLS = ['lim_a', 'lim_a', 'free_b', 'free_b', 'res_c', 'lock_w', 'lock_r', 'lock_r', 'slow_idem', 'slow_once'] as const;
const TENANTS = ['a', 'b', 'capped'] as const;

export function chaosYaml(toolUrl: string): string {
  const tool = (name: string, extra = '') => `
  - name: ${name}
    idempotent: ${IDEMPOTENT.has(name)}
    executor: { kind: http, url: "${toolUrl}/${name}" }${extra}`;
  return `
tools:${tool('lim_a', '\n    reads: []\n    writes: []')}${tool('free_b', '\n    reads: []\n    writes: []')}${tool('res_c', '\n    reads: []\n    writes: ["res:{name}"]\n    scope: global')}${tool('lock_w', '\n    reads: []\n    writes: ["file:/shared"]\n    scope: global')}${tool('lock_r', '\n    reads: ["file:/shared"]\n    writes: []\n    scope: global')}${tool('slow_idem', '\n    reads: []\n    writes: []')}${tool('slow_once', '\n    reads: []\n    writes: []')}
limits:
  tool: { lim_a: ${CHAOS_LIMITS.lim_a} }
  tenant: { capped: ${CHAOS_LIMITS.capped} }
  resource: { "res:*": ${CHAOS_LIMITS.res} }
  maxActiveRunsPerTenant: ${CHAOS_LIMITS.maxActiveRunsPerTenant}
defaults:
  failure: partial
`;
}

export interface ChaosOptions {
  replicas: number;
  clients: number;
  seconds: number;
  seed: number;
  leaseMs: number;
  /** Pause (SIGSTOP) one replica past its lease once, halfway. */
  pause: boolean;
  /** The pause between kills: between these (ms). */
  killEveryMs: [number, number];
  /** How long to wait at the end for every run to end. */
  settleMs: number;
  log: (line: string) => void;
}

export interface Accepted {
  id: string;
  tenant: string;
  replica: number;
  at: number;
}

export interface Cancel {
  runId: string;
  via: number;
  owner: number;
  at: number;
  status: number;
  /** The run's status in the answer. */
  answered: string | undefined;
}

export interface Fault {
  kind: 'kill' | 'pause';
  replica: number;
  /** performance.now() when it was killed or stopped, and when it was started or continued again. */
  from: number;
  to: number | undefined;
}

export interface ChaosRecord {
  cluster: TestCluster;
  accepted: Accepted[];
  refused: Map<string, number>;
  /** Submissions with no answer (the replica died, or was paused, meanwhile). */
  unanswered: number;
  cancels: Cancel[];
  faults: Fault[];
  /** Every replica process started, in order (their logs say what they took over). */
  children: { replica: number; child: ServerChild }[];
  /** Replica processes that exited without being killed: a crash (each was started again). */
  crashes: { replica: number; code: number | null; signal: string | null; tail: string }[];
  startedAt: number;
  endedAt: number;
  /** Whether every run had ended within `settleMs`, and when (ms after the clients stopped). */
  settledMs: number | undefined;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A random run: 1–4 calls, some after another (a reference to its output). */
function randomRun(rand: () => number): { tenant: string; calls: { id: string; tool: string; args: Record<string, unknown> }[] } {
  const tenant = pick(rand, TENANTS);
  const n = intIn(rand, 1, 4);
  const calls = Array.from({ length: n }, (_, k) => {
    const tool = pick(rand, TOOLS);
    const slow = tool === 'slow_idem' || tool === 'slow_once';
    const args: Record<string, unknown> = { t: tenant, ms: slow ? intIn(rand, 800, 3000) : intIn(rand, 50, 400) };
    if (tool === 'res_c') args.name = `n${intIn(rand, 0, 2)}`;
    if (k > 0 && rand() < 0.3) args.after = `\${c${intIn(rand, 0, k - 1)}.output.callId}`;
    return { id: `c${k}`, tool, args };
  });
  return { tenant, calls };
}

export async function runChaos(o: ChaosOptions): Promise<ChaosRecord> {
  const rand = rng(o.seed);
  o.log(`starting PostgreSQL and ${o.replicas} replicas (lease ${o.leaseMs} ms)…`);
  const cluster = await startCluster(o.replicas, chaosYaml, { leaseMs: o.leaseMs, perReplicaUrls: true, logLevel: 'info' });
  const rec: ChaosRecord = {
    cluster,
    accepted: [],
    refused: new Map(),
    unanswered: 0,
    cancels: [],
    faults: [],
    children: [],
    crashes: [],
    startedAt: performance.now(),
    endedAt: 0,
    settledMs: undefined,
  };
  const down = new Set<number>();
  const killed = new Set<ServerChild>();
  let stopping = false;
  // A replica that exits on its own is a crash: noted, and started again so that the run goes on.
  const watch = (replica: number, child: ServerChild) => {
    rec.children.push({ replica, child });
    void child.exited.then(({ code, signal }) => {
      if (killed.has(child) || stopping) return;
      rec.crashes.push({
        replica,
        code,
        signal,
        tail: child
          .output()
          .split('\n')
          .filter((l) => !l.includes('"request completed"') && !l.includes('"incoming request"'))
          .slice(-12)
          .join('\n'),
      });
      o.log(`replica r${replica} exited on its own (code ${code}, signal ${signal}); starting it again`);
      if (cluster.replicas[replica] === child) {
        cluster.replicas[replica] = undefined;
        down.add(replica);
        void start(replica).then(
          () => down.delete(replica),
          () => {},
        );
      }
    });
  };
  cluster.replicas.forEach((child, replica) => {
    if (child) watch(replica, child);
  });
  const live = () => Array.from({ length: o.replicas }, (_, i) => i).filter((i) => !down.has(i) && cluster.replicas[i]);
  const start = async (i: number) => {
    for (let tries = 0; ; tries++) {
      try {
        watch(i, await cluster.start(i));
        return;
      } catch (err) {
        if (tries >= 3) throw err;
        o.log(`replica r${i} did not start (${(err as Error).message.split('\n')[0]}); again`);
      }
    }
  };
  const deadline = performance.now() + o.seconds * 1000;
  const running = () => performance.now() < deadline;

  const client = async (k: number) => {
    const r = rng(o.seed * 1000 + k + 1);
    while (running()) {
      const targets = live();
      if (targets.length === 0) {
        await sleep(100);
        continue;
      }
      const i = pick(r, targets);
      const run = randomRun(r);
      let id: string | undefined;
      try {
        const res = await cluster.request(i, 'POST', '/v1/runs', run, 10_000);
        if (res.status === 201) {
          id = res.body.id as string;
          rec.accepted.push({ id, tenant: run.tenant, replica: i, at: performance.now() });
        } else {
          const code = `${res.status} ${res.body?.error?.code ?? ''}`;
          rec.refused.set(code, (rec.refused.get(code) ?? 0) + 1);
        }
      } catch {
        rec.unanswered++;
      }
      if (id === undefined) {
        await sleep(intIn(r, 100, 400));
        continue;
      }
      if (r() < 0.25) {
        const runId = id;
        const delay = intIn(r, 50, 2500);
        void (async () => {
          await sleep(delay);
          const others = live().filter((j) => j !== i);
          if (others.length === 0) return;
          const via = pick(r, others);
          const at = performance.now();
          try {
            const res = await cluster.request(via, 'POST', `/v1/runs/${runId}/cancel`, undefined, 10_000);
            rec.cancels.push({ runId, via, owner: i, at, status: res.status, answered: res.body?.status });
          } catch {
            rec.cancels.push({ runId, via, owner: i, at, status: 0, answered: undefined });
          }
        })();
      }
      // Follow the run through any replica until it ends (or 15 s), then think a little.
      const until = performance.now() + 15_000;
      while (running() && performance.now() < until) {
        await sleep(intIn(r, 200, 500));
        const t = live();
        if (t.length === 0) continue;
        try {
          const got = await cluster.request(pick(r, t), 'GET', `/v1/runs/${id}`, undefined, 5000);
          if (got.status === 200 && got.body.endedAt !== null) break;
        } catch {
          // That replica died meanwhile: ask another next time.
        }
      }
      await sleep(intIn(r, 0, 300));
    }
  };

  const killer = async () => {
    const restarts: Promise<void>[] = [];
    while (running()) {
      await sleep(intIn(rand, o.killEveryMs[0], o.killEveryMs[1]));
      if (!running()) break;
      const targets = live();
      if (targets.length < 2) continue;
      const i = pick(rand, targets);
      const child = cluster.replicas[i] as ServerChild;
      down.add(i);
      const fault: Fault = { kind: 'kill', replica: i, from: performance.now(), to: undefined };
      rec.faults.push(fault);
      killed.add(child);
      await child.kill9();
      cluster.replicas[i] = undefined;
      // Back soon (the restarted process takes its runs over at once) or after the lease (another does).
      const away = rand() < 0.5 ? intIn(rand, 100, 1000) : intIn(rand, o.leaseMs, o.leaseMs * 2 + 2000);
      o.log(`kill -9 r${i}; back in ${away} ms`);
      restarts.push(
        (async () => {
          await sleep(away);
          await start(i);
          fault.to = performance.now();
          down.delete(i);
        })(),
      );
    }
    await Promise.all(restarts);
  };

  const pauser = async () => {
    if (!o.pause) return;
    await sleep(Math.floor((o.seconds * 1000) / 2));
    // Once two replicas are up (restarts are slow on a busy machine), one of them.
    while (live().length < 2) {
      if (performance.now() > deadline - o.leaseMs - 2000) return;
      await sleep(250);
    }
    const i = pick(rand, live());
    const child = cluster.replicas[i] as ServerChild;
    down.add(i);
    const fault: Fault = { kind: 'pause', replica: i, from: performance.now(), to: undefined };
    rec.faults.push(fault);
    child.proc.kill('SIGSTOP');
    o.log(`SIGSTOP r${i} for ${o.leaseMs + 2000} ms`);
    await sleep(o.leaseMs + 2000);
    child.proc.kill('SIGCONT');
    fault.to = performance.now();
    // It loses its lease on waking and joins again; clients use it once it says so.
    await sleep(1000);
    down.delete(i);
  };

  const ticker = setInterval(
    () =>
      o.log(
        `${Math.round((performance.now() - rec.startedAt) / 1000)} s: ${rec.accepted.length} runs accepted, ${rec.faults.length} faults`,
      ),
    10_000,
  );
  try {
    await Promise.all([...Array.from({ length: o.clients }, (_, k) => client(k)), killer(), pauser()]);
  } finally {
    clearInterval(ticker);
  }
  rec.endedAt = performance.now();
  // Everything up again, then every run must end.
  for (let i = 0; i < o.replicas; i++) if (!cluster.replicas[i]) await start(i);
  down.clear();
  o.log(`clients stopped; waiting up to ${o.settleMs / 1000} s for every run to end…`);
  rec.settledMs = await settle(cluster, o.settleMs);
  stopping = true;
  return rec;
}

/** Waits until no run is active in the database; ms waited, or undefined when some still are after `bound`. */
async function settle(cluster: TestCluster, boundMs: number): Promise<number | undefined> {
  const { default: pg } = await import('pg');
  const db = new pg.Client({ connectionString: cluster.db });
  await db.connect();
  const t0 = performance.now();
  try {
    for (;;) {
      const n = Number(
        (
          await db.query<{ n: string }>(
            `SELECT count(*) AS n FROM runs WHERE status IN ('queued', 'running', 'needs_replan') OR ended_at IS NULL`,
          )
        ).rows[0]?.n,
      );
      if (n === 0) return performance.now() - t0;
      if (performance.now() - t0 > boundMs) return undefined;
      await sleep(250);
    }
  } finally {
    await db.end();
  }
}
