/**
 * The default backend of the adapters: an in-process engine (DESIGN §10, §17) whose tools run in the
 * agent's own process (in-process.ts). No HTTP; `options.store` makes the runs durable.
 */
import type { RunEvent } from '../core/events.js';
import type { CallView } from '../core/view.js';
import { Engine, newRunId } from '../engine/engine.js';
import type { EventSink } from '../engine/options.js';
import { InProcessExecutor } from './in-process.js';
import { adapterConfig, type AdapterOptions } from './options.js';
import { ToolgraphCallError, type BackendCall, type BackendRun, type StepBackend, type StepOutcome } from './step-runs.js';

const ENDS = new Set(['call.succeeded', 'call.failed', 'call.blocked', 'call.cancelled']);

/** An in-process engine for one adapter's tools. */
export class LocalBackend implements StepBackend {
  readonly engine: Engine;
  private readonly executor = new InProcessExecutor();
  private readonly runs = new Map<string, (callId: string, outcome: StepOutcome) => void>();
  private readonly closeStore: (() => Promise<void>) | undefined;
  private readonly tenant: string;
  private readonly tags: Record<string, string> | undefined;
  private readonly priority: number | undefined;

  constructor(toolNames: readonly string[], options: AdapterOptions, sink?: { sink: EventSink; close?: () => Promise<void> }) {
    const config = adapterConfig(toolNames, options);
    this.tenant = options.tenant ?? 'default';
    this.tags = options.tags;
    this.priority = options.priority;
    this.engine = new Engine({ config, executor: this.executor, ...(sink ? { sink: sink.sink } : {}) });
    this.closeStore = sink?.close;
    this.engine.onEvent((e, _view, call) => this.heard(e, call));
  }

  open(calls: BackendCall[], settle: (callId: string, outcome: StepOutcome) => void): BackendRun {
    const id = newRunId();
    this.runs.set(id, settle);
    for (const c of calls) this.executor.register(id, c.input.id, c.run, c.project);
    const run = this.engine.open({
      runId: id,
      tenant: this.tenant,
      calls: calls.map((c) => c.input),
      ...(this.tags ? { tags: this.tags } : {}),
      ...(this.priority !== undefined ? { priority: this.priority } : {}),
    });
    run.done().then(
      () => this.runs.delete(id),
      (err: unknown) => this.refused(id, calls, err),
    );
    return {
      id,
      add: async (more) => {
        for (const c of more) this.executor.register(id, c.input.id, c.run, c.project);
        await run.add(...more.map((c) => c.input));
      },
      seal: async () => {
        await run.seal();
      },
      cancel: () => void this.engine.cancel(id).catch(() => {}),
    };
  }

  /** Stops the engine (calls still running finish first, up to `drainMs`) and closes the store it opened. */
  async close(drainMs = 5000): Promise<void> {
    await this.engine.close({ drainMs });
    await this.closeStore?.();
  }

  /** A call of one of our runs ended: its framework call gets the outcome. */
  private heard(e: RunEvent, call: CallView | undefined): void {
    if (!ENDS.has(e.type) || !e.callId) return;
    const settle = this.runs.get(e.runId);
    if (!settle) return;
    const raw = this.executor.take(e.runId, e.callId);
    settle(e.callId, outcomeOf(e, call, raw));
  }

  /** The store refused the run: every call of it fails with that error. */
  private refused(runId: string, calls: BackendCall[], err: unknown): void {
    const settle = this.runs.get(runId);
    this.runs.delete(runId);
    for (const c of calls) settle?.(c.input.id, { ok: false, error: err });
  }
}

function outcomeOf(e: RunEvent, call: CallView | undefined, raw: ReturnType<InProcessExecutor['take']>): StepOutcome {
  switch (e.type) {
    case 'call.succeeded': {
      const output = e.data.output;
      // The tool's own value, unless an after_call hook replaced what the engine recorded.
      if (raw?.ok && raw.handed === output) return { ok: true, value: raw.value };
      return { ok: true, value: output };
    }
    case 'call.failed':
      if (e.data.error.code === 'tool_error' && raw && !raw.ok) return { ok: false, error: raw.error };
      return { ok: false, error: new ToolgraphCallError(e.data.error) };
    case 'call.blocked':
      return { ok: false, error: new ToolgraphCallError(e.data.blockedBy) };
    case 'call.cancelled':
      return { ok: false, error: new ToolgraphCallError(e.data.reason) };
    default:
      return { ok: false, error: new ToolgraphCallError(call?.error ?? { code: 'interrupted', message: `the call ended with ${e.type}` }) };
  }
}
