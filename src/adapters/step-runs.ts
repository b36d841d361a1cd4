/**
 * One model step's tool calls as one run (DESIGN §17), for frameworks that call each tool's function
 * separately and say nothing of where a step ends.
 *
 * Calls that arrive in one turn of the event loop go to the engine together; the first of them opens a
 * streamed run (DESIGN §10), and calls that arrive while it is open join it in arrival order, which is
 * the model's order (the frameworks start a step's calls in order, and `streamText` starts each as the
 * model writes it). So conflicting calls run in model order, the rest at once, under the limits and
 * hooks. The run is sealed as soon as every call it has was answered: a call that arrives later opens
 * the next run (whatever it could conflict with has ended by then).
 *
 * Each framework call gets the outcome of its own call: the tool's value or error as the tool gave
 * them, or a `ToolgraphCallError` when toolgraph ended the call itself (a hook denied it, a limit
 * timed it out, a cancel).
 */
import type { CallInput } from '../core/calls.js';
import type { CallError } from '../core/errors.js';
import type { ToolFunction } from './in-process.js';

/** A framework's call of a tool, as the adapter hands it over. */
export interface StepCall {
  tool: string;
  args: Record<string, unknown>;
  /** The model's call id; another is used when it is not a valid toolgraph id or is taken. */
  id?: string;
  run: ToolFunction;
  /** What toolgraph records of the tool's value (default: the value, when it is JSON). */
  project?: (value: unknown) => unknown;
  /** The framework's abort signal: aborting it cancels the step's run. */
  signal?: AbortSignal;
}

/** How a call ended, for the framework. */
export type StepOutcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** A call as a backend takes it: its toolgraph input and its function. */
export interface BackendCall {
  input: CallInput;
  run: ToolFunction;
  project: ((value: unknown) => unknown) | undefined;
}

/** A run of a backend, open for more calls until sealed. */
export interface BackendRun {
  readonly id: string;
  /** Adds calls in order; rejects when the run takes no more (then they go to a new run). */
  add(calls: BackendCall[]): Promise<void>;
  seal(): Promise<void>;
  cancel(): void;
}

/** Where the runs go: an in-process engine, or a toolgraph server. */
export interface StepBackend {
  /** Opens a run with its first calls; `settle` is told each call's outcome, once. */
  open(calls: BackendCall[], settle: (callId: string, outcome: StepOutcome) => void): BackendRun;
}

/** toolgraph ended the call itself: `code` is the call's error code (`hook_denied`, `timeout`, …). */
export class ToolgraphCallError extends Error {
  readonly code: string;
  readonly details: unknown;
  constructor(error: CallError) {
    super(`${error.code}: ${error.message}`);
    this.name = 'ToolgraphCallError';
    this.code = error.code;
    this.details = error.details;
  }
}

const CALL_ID_RE = /^[A-Za-z0-9_.:-]{1,128}$/;

interface Pending {
  call: StepCall;
  id: string;
  resolve: (o: StepOutcome) => void;
}

interface OpenStep {
  run: BackendRun | undefined;
  ids: Set<string>;
  /** Calls sent and not answered yet. */
  waiting: number;
  /** Calls that arrived and are not sent yet. */
  buffered: Pending[];
  calls: Map<string, Pending>;
  /** The frameworks' abort signals, each with its listener (removed when the step is done). */
  signals: Map<AbortSignal, () => void>;
}

export class StepRuns {
  private current: OpenStep | undefined;
  private flushScheduled = false;

  constructor(private readonly backend: StepBackend) {}

  /** Runs one call as part of the open step; resolves with its outcome. */
  call(call: StepCall): Promise<StepOutcome> {
    this.current ??= newStep();
    const outcome = this.enqueue(this.current, call);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      queueMicrotask(() => queueMicrotask(() => this.flush()));
    }
    return outcome;
  }

  /** Runs calls known to form a whole step (LangGraph's node gets them together) as one run of their own. */
  batch(calls: StepCall[]): Promise<StepOutcome[]> {
    const step = newStep();
    const outcomes = calls.map((c) => this.enqueue(step, c));
    this.send(step, step.buffered.splice(0));
    return Promise.all(outcomes);
  }

  private enqueue(step: OpenStep, call: StepCall): Promise<StepOutcome> {
    const id = call.id !== undefined && CALL_ID_RE.test(call.id) && !step.ids.has(call.id) ? call.id : freshId(step.ids);
    step.ids.add(id);
    const signal = call.signal;
    // One listener per signal and step (a framework passes one signal to all the calls of a step).
    if (signal && !step.signals.has(signal)) {
      const onAbort = () => step.run?.cancel();
      step.signals.set(signal, onAbort);
      if (signal.aborted) queueMicrotask(onAbort);
      else signal.addEventListener('abort', onAbort, { once: true });
    }
    return new Promise<StepOutcome>((resolve) => {
      const p: Pending = { call, id, resolve };
      step.buffered.push(p);
      step.calls.set(id, p);
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const step = this.current;
    if (!step || step.buffered.length === 0) return;
    this.send(step, step.buffered.splice(0));
  }

  private send(step: OpenStep, pending: Pending[]): void {
    const calls = pending.map(
      (p): BackendCall => ({ input: { id: p.id, tool: p.call.tool, args: p.call.args }, run: p.call.run, project: p.call.project }),
    );
    step.waiting += pending.length;
    if (!step.run) {
      step.run = this.backend.open(calls, (callId, outcome) => this.settled(step, callId, outcome));
      if (step.waiting === 0) this.close(step);
      return;
    }
    step.run.add(calls).catch(() => {
      // The run took no more (sealed at its open-run timeout): these calls open a run of their own.
      step.waiting -= pending.length;
      const next = newStep();
      for (const p of pending) next.ids.add(p.id);
      for (const p of pending) {
        step.calls.delete(p.id);
        next.calls.set(p.id, p);
      }
      if (this.current === step) this.current = next;
      this.send(next, pending);
    });
  }

  private settled(step: OpenStep, callId: string, outcome: StepOutcome): void {
    const p = step.calls.get(callId);
    if (!p) return;
    step.calls.delete(callId);
    step.waiting--;
    p.resolve(outcome);
    if (step.waiting === 0 && step.buffered.length === 0 && step.run) this.close(step);
  }

  /** Every call of the step was answered: the next call opens a new run, and this one is sealed. */
  private close(step: OpenStep): void {
    if (this.current === step) this.current = undefined;
    for (const [signal, onAbort] of step.signals) signal.removeEventListener('abort', onAbort);
    step.signals.clear();
    const run = step.run;
    queueMicrotask(() => void run?.seal().catch(() => {}));
  }
}

function newStep(): OpenStep {
  return { run: undefined, ids: new Set(), waiting: 0, buffered: [], calls: new Map(), signals: new Map() };
}

function freshId(taken: Set<string>): string {
  let n = taken.size + 1;
  while (taken.has(`call_${n}`)) n++;
  return `call_${n}`;
}
