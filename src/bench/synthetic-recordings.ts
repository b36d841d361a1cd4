/**
 * Synthetic recordings from a seed: a random batch (references, file hazards, retries, reviews, a
 * compensating tool, sometimes a fail-fast tool, a cancel or a replan) runs through the real Scheduler
 * on the virtual-clock Simulation with scripted attempt outcomes, and `recordingOf` turns its events
 * into a recording. Having no jitter, its replay must match exactly, even with tolerance 0: the
 * property tests check that, and the replay benchmark uses these as its corpus.
 *
 * Outside inputs (reviews, cancel, replans) fall on distinct residues of 10 ms, so no two of them ever
 * share an instant (their order at one instant is not part of a recording).
 */
import type { CallInput } from '../core/calls.js';
import { callError } from '../core/errors.js';
import { Scheduler, type StartAttempt } from '../core/scheduler.js';
import { Simulation, type SimulatedAttempt } from '../core/simulation.js';
import type { FailureMode, Limits, Policy, ToolManifest } from '../core/tool.js';
import { createAjv, createCatalog } from '../config/catalog.js';
import type { Recording } from '../contract/recording.js';
import { recordingOf, type RecordingConfig } from '../replay/recording.js';
import { rng } from '../core/random.js';

const sharedAjv = createAjv();

function tool(name: string, partial: Partial<ToolManifest>): ToolManifest {
  return {
    name,
    scope: 'tenant',
    risk: 'write',
    idempotent: false,
    timeoutMs: 60_000,
    after: [],
    requires: [],
    executor: { kind: 'builtin', name: 'echo' },
    ...partial,
  };
}
const retry = { attempts: 3, backoffMs: 20, maxBackoffMs: 100 };

export const SYNTHETIC_TOOLS: ToolManifest[] = [
  tool('read', { reads: ['file:{path}'], writes: [], risk: 'read', idempotent: true }),
  tool('write', {
    reads: [],
    writes: ['file:{path}'],
    input: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  }),
  tool('fetch', { reads: [], writes: [], risk: 'read', idempotent: true, retry, concurrency: 2 }),
  tool('test', { reads: ['file:*'], writes: [], risk: 'read', idempotent: true }),
  tool('deploy', {
    reads: [],
    writes: ['service:{path}'],
    risk: 'dangerous',
    scope: 'global',
    compensate: { tool: 'undo', args: { path: '${self.args.path}' } },
  }),
  tool('create', { reads: [], writes: ['branch:{path}'], compensate: { tool: 'undo', args: { path: '${self.args.path}' } } }),
  tool('undo', { reads: [], writes: [] }),
  tool('shell', { failure: 'fail_fast' }),
];

export interface SyntheticOptions {
  /** Calls in the batch. @default 3–16 from the seed */
  calls?: number;
}

/** A synthetic run's recording (and the config it ran under). */
export function syntheticRecording(seed: number, opts: SyntheticOptions = {}): { recording: Recording; config: RecordingConfig } {
  const r = rng(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)] as T;
  const limits: Limits = {
    global: int(2, 8),
    tenant: {},
    tool: { fetch: 2, ...(r() < 0.5 ? { test: 1 } : {}) },
    resource: {},
    rate: { tenant: {} },
    maxCallsPerRun: 1000,
  };
  if (r() < 0.3) limits.perRun = int(1, 4);
  const policy: Policy = { rules: r() < 0.5 ? [{ match: { tool: 'deploy' }, after: ['test'] }] : [] };
  const config: RecordingConfig = {
    tools: SYNTHETIC_TOOLS,
    catalog: createCatalog(SYNTHETIC_TOOLS, { ajv: sharedAjv }),
    policy,
    limits,
    defaults: { timeoutMs: 60_000, failure: 'partial', openRunTimeoutMs: 30_000 },
  };
  const failure: FailureMode = pick(['partial', 'partial', 'fail_fast', 'replan']);
  const toolNames = SYNTHETIC_TOOLS.filter((t) => t.name !== 'undo' && (t.name !== 'shell' || r() < 0.3)).map((t) => t.name);
  const n = opts.calls ?? int(3, 16);
  const makeCall = (id: string, earlier: readonly CallInput[]): CallInput => {
    const tool = pick(toolNames);
    const args: Record<string, unknown> = { path: `p${int(0, 5)}`, ms: 10 * int(0, 8), out: int(0, 1000) };
    if (r() < 0.25) args.fail = r() < 0.5 ? int(1, 3) : 'always';
    if (r() < 0.7) args.retryable = true;
    if (earlier.length > 0 && r() < 0.3) args.from = `\${${pick(earlier).id}.output.out}`;
    return { id, tool, args };
  };
  const calls: CallInput[] = [];
  for (let i = 0; i < n; i++) calls.push(makeCall(`c${i}`, calls));
  const estimates = Object.fromEntries(toolNames.filter(() => r() < 0.7).map((t) => [t, int(1, 80)]));

  const attempt = (s: StartAttempt): SimulatedAttempt => {
    const a = s.args;
    if (s.kind === 'compensation') return { durationMs: 10, result: { ok: true, output: { undone: a.path } } };
    const fails = a.fail === 'always' || (typeof a.fail === 'number' && s.attempt <= a.fail);
    const durationMs = typeof a.ms === 'number' ? a.ms : 10;
    if (!fails) return { durationMs, result: { ok: true, output: { out: a.out, attempt: s.attempt } } };
    return {
      durationMs,
      result: { ok: false, error: callError('tool_error', `${s.callId} attempt ${s.attempt} failed`), retryable: a.retryable === true },
    };
  };
  const scheduler = new Scheduler({ catalog: config.catalog, policy, limits, defaults: config.defaults });
  const runId = `run_syn_${seed}`;
  let replanned = false;
  const sim = new Simulation(scheduler, {
    attempt,
    onEvent(e, s) {
      if (e.type === 'call.awaiting_review' && e.callId !== undefined) {
        const callId = e.callId;
        const decision = pick(['approve', 'approve', 'reject', 'edit'] as const);
        const args = { ...e.data.args, edited: true };
        s.at(s.now + 10 * int(0, 5) + 3, (now) => {
          try {
            return scheduler.decideReview(now, { runId, callId, decision, ...(decision === 'edit' ? { args } : {}) });
          } catch {
            return { events: [], starts: [], aborts: [] }; // the call was cancelled meanwhile
          }
        });
      }
      if (e.type === 'run.completed' && e.data.status === 'needs_replan' && !replanned) {
        replanned = true;
        const more = [0, 1].map((k) => makeCall(`r${k}`, calls));
        // A cancel may come first: a cancelled run takes no replan.
        s.at(s.now + 10 * int(0, 3) + 5, (now) =>
          scheduler.runStatus(runId) === 'needs_replan' ? scheduler.replan(now, runId, more) : { events: [], starts: [], aborts: [] },
        );
      }
    },
  });
  sim.at(0, (now) => scheduler.submit(now, { runId, tenant: 'acme', calls, failure, estimates }));
  if (r() < 0.15) sim.at(10 * int(0, 10) + 7, (now) => scheduler.cancel(now, runId));
  sim.run();
  return { recording: recordingOf(sim.events, config), config };
}
