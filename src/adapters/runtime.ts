/**
 * What every adapter holds: the step runner over its backend, made on the first call (so wrapping the
 * tools costs nothing and opens nothing), and `close`. The framework files (ai-sdk.ts, langgraph.ts,
 * openai-agents.ts) only translate their tools' calls and results.
 */
import type { RunEvent } from '../core/events.js';
import type { Engine, RunListener } from '../engine/engine.js';
import type { EventSink } from '../engine/options.js';
import { parseStoreValue } from '../config/store-url.js';
import { LocalBackend } from './local.js';
import type { AdapterOptions } from './options.js';
import { RemoteBackend } from './remote.js';
import { StepRuns, type StepBackend } from './step-runs.js';

export class AdapterRuntime {
  private steps: StepRuns | undefined;
  private backend: StepBackend | undefined;
  private readonly listeners: RunListener[] = [];

  constructor(
    private readonly toolNames: readonly string[],
    private readonly options: AdapterOptions,
  ) {
    const p = options.priority;
    if (p !== undefined && !(Number.isInteger(p) && p >= 1 && p <= 5))
      throw new RangeError(`options.priority: ${JSON.stringify(p)} is not an integer from 1 (most urgent) to 5`);
  }

  /** The step runner (made on first use). */
  get runs(): StepRuns {
    if (!this.steps) {
      this.backend = this.options.client
        ? new RemoteBackend(this.options.client, this.toolNames, this.options)
        : new LocalBackend(this.toolNames, this.options, this.options.store === undefined ? undefined : sinkOf(this.options.store));
      if (this.backend instanceof LocalBackend) for (const l of this.listeners) this.backend.engine.onEvent(l);
      this.steps = new StepRuns(this.backend);
    }
    return this.steps;
  }

  /** The in-process engine, once a call made it (`undefined` with `options.client`). */
  get engine(): Engine | undefined {
    return this.backend instanceof LocalBackend ? this.backend.engine : undefined;
  }

  /** Listens to every event of the in-process engine's runs (one run per model step). */
  onEvent(listener: RunListener): void {
    this.listeners.push(listener);
    if (this.backend instanceof LocalBackend) this.backend.engine.onEvent(listener);
  }

  /** Stops the in-process engine (running calls finish first) and closes the store it opened. */
  async close(): Promise<void> {
    if (this.backend instanceof LocalBackend) await this.backend.close();
  }
}

/** A store object as it is, or a SQLite file / `postgres://` URL opened on first use. */
function sinkOf(store: string | EventSink): { sink: EventSink; close?: () => Promise<void> } {
  if (typeof store !== 'string') return { sink: store };
  const choice = parseStoreValue(store, 'options.store');
  const opened: Promise<{ append(events: readonly RunEvent[]): Promise<void>; close(): Promise<void> }> =
    choice.kind === 'sqlite'
      ? import('../store/sqlite.js').then((m) => m.openSqliteStore(choice.file))
      : import('../store/postgres.js').then((m) => m.openPostgresStore({ url: choice.url }));
  opened.catch(() => {});
  return {
    sink: { append: async (events) => (await opened).append(events) },
    close: async () => (await opened.catch(() => undefined))?.close(),
  };
}

const RUNTIME = Symbol.for('toolgraph.adapter');

/** Hangs the runtime on the wrapped tools without making it a tool (a symbol key is not enumerated). */
export function attach<T extends object>(target: T, runtime: AdapterRuntime): T {
  Object.defineProperty(target, RUNTIME, { value: runtime, enumerable: false });
  return target;
}

/**
 * The runtime behind tools an adapter wrapped: its engine (`engine.get(runId)`, `engine.onEvent`) and
 * `close()`, which a program that ends should call when it passed `options.store`.
 *
 * @example
 * const tools = withToolgraph(myTools, { store: './runs.db' });
 * // … the agent runs …
 * await toolgraphOf(tools)?.close();
 */
export function toolgraphOf(wrapped: object): AdapterRuntime | undefined {
  return (wrapped as { [RUNTIME]?: AdapterRuntime })[RUNTIME];
}
