/**
 * `options.client`: each step is a streamed run of a toolgraph server (DESIGN §10, §17) whose catalog
 * declares the agent's tools `executor: { kind: client }`. The server plans and schedules the calls
 * (limits and locks hold across every agent process, the dashboard shows the run); as each call
 * starts, its `call.started` carries a dispatch token, this process runs the tool's function and posts
 * `{ token, output }` or `{ token, error }` to `POST /v1/runs/{id}/calls/{callId}/result`. The typed
 * client's `open(batch, { handlers })` does that protocol; this file only routes each call to the
 * framework call it belongs to, and hears the calls' ends on the run's event stream.
 */
import type { CallError } from '../core/errors.js';
import type { ToolFunction } from './in-process.js';
import { jsonView } from './in-process.js';
import type { AdapterOptions, RemoteClient, RemoteEvent, RemoteHandlerContext } from './options.js';
import { ToolgraphCallError, type BackendCall, type BackendRun, type StepBackend, type StepOutcome } from './step-runs.js';

interface Registered {
  call: BackendCall;
  /** The last answer this process gave for the call. */
  raw?: { ok: true; value: unknown; handed: string } | { ok: false; error: unknown };
}

export class RemoteBackend implements StepBackend {
  constructor(
    private readonly client: RemoteClient,
    private readonly toolNames: readonly string[],
    private readonly options: AdapterOptions,
  ) {}

  open(calls: BackendCall[], settle: (callId: string, outcome: StepOutcome) => void): BackendRun {
    const registered = new Map<string, Registered>();
    const register = (cs: BackendCall[]) => {
      for (const c of cs) registered.set(c.input.id, { call: c });
    };
    register(calls);
    const handler = async (args: Record<string, unknown>, ctx: RemoteHandlerContext) => {
      const r = registered.get(ctx.callId);
      if (!r) throw new Error(`no function is registered for call ${ctx.callId} in this process`);
      const fn: ToolFunction = r.call.run;
      try {
        const value = await fn(args, ctx.signal);
        const handed = jsonView(r.call.project ? r.call.project(value) : value);
        r.raw = { ok: true, value, handed: JSON.stringify(handed) };
        return handed;
      } catch (error) {
        r.raw = { ok: false, error };
        throw error;
      }
    };
    // Every tool of the adapter: a call appended later may use a tool the first calls did not.
    const handlers = Object.fromEntries(this.toolNames.map((name) => [name, handler]));
    const opened = this.client.open(
      {
        tenant: this.options.tenant ?? 'default',
        failure: this.options.failure ?? 'partial',
        calls: calls.map((c) => c.input),
        ...(this.options.tags ? { tags: this.options.tags } : {}),
        ...(this.options.priority !== undefined ? { priority: this.options.priority } : {}),
      },
      { handlers },
    );
    const stop = new AbortController();
    const pending = new Set(calls.map((c) => c.input.id));
    opened.then(
      async (run) => {
        try {
          for await (const e of this.client.events(run.id, { signal: stop.signal })) {
            const callId = e.callId ?? undefined;
            if (callId === undefined || !END_TYPES.has(e.type) || !registered.has(callId)) continue;
            const r = registered.get(callId) as Registered;
            registered.delete(callId);
            pending.delete(callId);
            settle(callId, remoteOutcome(e, r));
          }
        } catch (err) {
          for (const id of pending) settle(id, { ok: false, error: err });
        }
      },
      (err: unknown) => {
        for (const c of calls) settle(c.input.id, { ok: false, error: err });
      },
    );
    return {
      id: '',
      add: async (more) => {
        register(more);
        for (const c of more) pending.add(c.input.id);
        const run = await opened;
        await run.add(...more.map((c) => c.input));
      },
      seal: async () => {
        const run = await opened;
        await run.seal();
        await run.done();
        stop.abort();
      },
      cancel: () => void opened.then((run) => this.client.cancel(run.id)).catch(() => {}),
    };
  }
}

const END_TYPES = new Set(['call.succeeded', 'call.failed', 'call.blocked', 'call.cancelled']);

function remoteOutcome(e: RemoteEvent, r: Registered): StepOutcome {
  const data = (e.data ?? {}) as { output?: unknown; error?: CallError; blockedBy?: CallError; reason?: CallError };
  if (e.type === 'call.succeeded') {
    if (r.raw?.ok && r.raw.handed === JSON.stringify(data.output ?? null)) return { ok: true, value: r.raw.value };
    return { ok: true, value: data.output };
  }
  const error = data.error ?? data.blockedBy ?? data.reason ?? { code: 'interrupted', message: `the call ended with ${e.type}` };
  if (e.type === 'call.failed' && error.code === 'tool_error' && r.raw && !r.raw.ok) return { ok: false, error: r.raw.error };
  return { ok: false, error: new ToolgraphCallError(error) };
}
