/**
 * Spans are made and exported off the main thread (DESIGN §15: an export never slows a run). The main
 * thread's trace feed (trace-feed.ts) writes each event that makes, ends or times a span as a few
 * values (entries: run-spans.mjs) to `q`; they go in batches to a worker thread (export-worker.mjs),
 * which makes the spans from them (`RunSpans`) and exports them with the SDK's BatchSpanProcessor and
 * OTLP/HTTP exporter. So the spans' making, their wait in the batch queue, the OTLP serializer and the
 * export requests are all the other thread's.
 *
 * Bounded: at most `maxQueueSize` × `VALUES_PER_SPAN` values are on their way (sent and not yet taken
 * by the thread, or waiting to be sent) before new runs go untraced, and twice that before the runs
 * traced are let go (see `TraceFeed`); the spans so dropped are counted and said through OpenTelemetry's
 * diagnostics as the SDK says its own ("Dropped N spans…"). If the thread stops, what it held is lost
 * and nothing is taken until it is started again, on the next entry a second later (or longer, up to a
 * minute, while threads stop before taking any).
 */
import { Worker } from 'node:worker_threads';
import { diag } from '@opentelemetry/api';
import type { EntryValue } from './run-spans.mjs';
import type { EntrySink } from './trace-feed.js';
import type { TracingOptions } from './types.js';

const WORKER_URL = new URL('./export-worker.mjs', import.meta.url);
/** Values sent to the thread in one message at most (about 20 runs of 5 calls); fewer after `POST_DELAY_MS`. */
const POST_VALUES = 2048;
/** Values on their way per span of the bound: a run of 5 calls (a NAME, CREATED and COMPLETED entry, and READY, ATTEMPT, STARTED and SUCCEEDED per call) is 116 values and 6 spans. */
const VALUES_PER_SPAN = 20;
const POST_DELAY_MS = 50;
/** The SDK's default queue bound (its `OTEL_BSP_MAX_QUEUE_SIZE`). */
const DEFAULT_MAX_QUEUE = 2048;
/** A thread that stopped is started again after this, doubled after each stop before it took a span. */
const RESTART_AFTER_MS = 1000;
const RESTART_AFTER_MAX_MS = 60_000;
/**
 * How much nicer than the process the export thread runs (export-worker.mjs). At +10 a thread woken by
 * a batch of spans no longer preempts the one that serves runs (Linux's scheduler lets a woken thread
 * preempt only when it is behind by more than the wake-up granularity, which it scales by the woken
 * thread's weight: ×9 at +10), yet it keeps about a tenth of a busy core, enough to keep up with the
 * spans of a saturated server (bench/RESULTS.md, "Traces").
 */
const EXPORT_NICE = 10;

export interface ExportThreadOptions extends TracingOptions {
  scope: { name: string; version: string };
  /** Told of an export that failed, and of the thread stopping (unthrottled: the caller throttles). */
  onError?: (message: string) => void;
  /** Told of spans dropped, as said through diag (unthrottled: the caller throttles). */
  onDrop?: (message: string, spans: number) => void;
  /** A thread was started again (it knows nothing of the runs traced so far). */
  onRestart?: () => void;
  /** The bound on values on their way before new runs go untraced. @default batch.maxQueueSize × 20 */
  maxValues?: number;
}

export class ExportThread implements EntrySink {
  private worker: Worker | undefined;
  /** Entries not sent yet. */
  q: EntryValue[] = [];
  base = Date.now();
  private timer: NodeJS.Timeout | undefined;
  /** Values sent and not yet taken by the thread. */
  private inFlight = 0;
  /** Spans dropped and not said yet. */
  private droppedSpans = 0;
  /** Values on their way before new runs go untraced (twice that before traced runs are let go). */
  private readonly maxValues: number;
  private started = false;
  private stoppedAt = -Infinity;
  private restartAfterMs = RESTART_AFTER_MS;
  /** The thread now running has taken entries. */
  private working = false;
  private shutDown = false;
  private nextId = 0;
  /** Flushes and shutdowns waiting for the thread's answer, by id. */
  private readonly waiters = new Map<number, () => void>();

  constructor(private readonly opts: ExportThreadOptions) {
    this.maxValues =
      opts.maxValues ?? (opts.batch?.maxQueueSize ?? envInt('OTEL_BSP_MAX_QUEUE_SIZE') ?? DEFAULT_MAX_QUEUE) * VALUES_PER_SPAN;
    this.start();
  }

  room(ongoing: boolean): boolean {
    if (this.shutDown || (!this.worker && !this.start())) return false;
    if (this.inFlight + this.q.length >= (ongoing ? 2 * this.maxValues : this.maxValues)) return false;
    if (this.droppedSpans > 0) this.sayDropped();
    return true;
  }

  get running(): boolean {
    return this.worker !== undefined && !this.shutDown;
  }

  wrote(): void {
    if (this.q.length >= POST_VALUES) this.post();
    else this.timer ??= setTimeout(() => this.post(), POST_DELAY_MS).unref();
  }

  dropped(spans: number): void {
    if (this.droppedSpans === 0) diag.debug('the trace export thread is behind (maxQueueSize reached), dropping spans');
    this.droppedSpans += spans;
  }

  /** Resolves once every span ended so far is exported (or failed to be); never rejects. */
  forceFlush(): Promise<void> {
    this.post();
    return this.ask('flush');
  }

  /** Flushes, and the thread ends; spans that end later are ignored. */
  async shutdown(): Promise<void> {
    if (this.shutDown) return;
    this.post();
    this.shutDown = true;
    await this.ask('shutdown');
  }

  /** Ends the thread at once, whatever it still holds (after a `shutdown` that took too long). */
  async terminate(): Promise<void> {
    this.shutDown = true;
    const worker = this.worker;
    this.worker = undefined;
    this.settleAll();
    await worker?.terminate();
  }

  private start(): boolean {
    if (this.shutDown || performance.now() - this.stoppedAt < this.restartAfterMs) return false;
    const { url, protocol, headers, serviceName, exportTimeoutMs, batch, scope } = this.opts;
    const worker = new Worker(WORKER_URL, {
      workerData: {
        url,
        protocol: protocol ?? 'http/protobuf',
        headers,
        serviceName: serviceName ?? 'toolgraph',
        exportTimeoutMs: exportTimeoutMs ?? 10_000,
        batch,
        scope,
        nice: EXPORT_NICE,
      },
    });
    // The thread never keeps the process alive: a flush or shutdown on exit waits for it, nothing else.
    worker.unref();
    worker.on('message', (m: { taken?: number; flushed?: number; error?: string; warn?: string }) => {
      // A shutdown is answered by the thread's end (`stopped` below).
      if (m.taken !== undefined) {
        this.inFlight = Math.max(0, this.inFlight - m.taken);
        this.restartAfterMs = RESTART_AFTER_MS;
        this.working = true;
      } else if (m.flushed !== undefined) this.settle(m.flushed);
      else if (m.error !== undefined) this.opts.onError?.(m.error);
      else if (m.warn !== undefined) this.warn(m.warn);
    });
    const stopped = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.stoppedAt = performance.now();
      // A thread that never took a span (its modules do not load, say) is not started every second.
      if (!this.working) this.restartAfterMs = Math.min(RESTART_AFTER_MAX_MS, this.restartAfterMs * 2);
      this.working = false;
      this.inFlight = 0;
      this.settleAll();
      if (!this.shutDown) this.opts.onError?.(`the trace export thread stopped: ${why}`);
    };
    worker.on('error', (err) => stopped(err.message));
    worker.on('exit', (code) => stopped(`exit code ${code}`));
    this.worker = worker;
    // What was written while no thread ran is lost with the thread that stopped.
    this.q = [];
    this.base = Date.now();
    if (this.started) this.opts.onRestart?.();
    this.started = true;
    return true;
  }

  private post(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.q.length === 0) return;
    const entries = this.q;
    const base = this.base;
    this.q = [];
    this.base = Date.now();
    if (!this.worker) return;
    this.inFlight += entries.length;
    // As JSON text, its times small whole numbers (from `base`): a string is copied to the thread as
    // is, and JSON.stringify of such a list took half the time of the structured clone of the list.
    this.worker.postMessage(`[${base},${JSON.stringify(entries).slice(1)}`);
  }

  /** Sends a flush or shutdown and resolves on its answer (at once without a thread). */
  private ask(kind: 'flush' | 'shutdown'): Promise<void> {
    if (!this.worker) return Promise.resolve();
    const id = this.nextId++;
    // Awaited, a flush or shutdown keeps the process alive until the thread answers (the thread's own
    // requests are not this event loop's to wait for).
    this.worker.ref();
    return new Promise<void>((resolve) => {
      this.waiters.set(id, resolve);
      this.worker?.postMessage({ [kind]: id });
    });
  }

  private settle(id: number): void {
    const resolve = this.waiters.get(id);
    if (!resolve) return;
    this.waiters.delete(id);
    if (this.waiters.size === 0) this.worker?.unref();
    resolve();
  }

  private settleAll(): void {
    for (const id of [...this.waiters.keys()]) this.settle(id);
  }

  private sayDropped(): void {
    this.warn(`Dropped ${this.droppedSpans} spans because maxQueueSize reached (on their way to the export thread)`);
    this.droppedSpans = 0;
  }

  /** A warning of the SDK's or of ours, through diag; one that says spans were dropped goes to `onDrop` too. */
  private warn(message: string): void {
    diag.warn(message);
    const dropped = /^Dropped (\d+) spans/.exec(message);
    if (dropped) this.opts.onDrop?.(message, Number(dropped[1]));
  }
}

function envInt(name: string): number | undefined {
  const n = Number(process.env[name]);
  return Number.isInteger(n) && n > 0 ? n : undefined;
}
