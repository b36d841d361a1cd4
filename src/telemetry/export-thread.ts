/**
 * Spans leave the main thread as soon as they end (DESIGN §15: an export never slows a run). Each ended
 * span's record (light-spans.ts) goes, in batches, to a worker thread (export-worker.mjs), which reads it
 * back as the SDK's `ReadableSpan` and exports it with the SDK's BatchSpanProcessor and OTLP/HTTP
 * exporter. So the OTLP serializer, the export requests, and the spans' wait in the batch queue (which
 * kept every span alive on the main heap for up to 5 s, into the old generation) are all the other
 * thread's.
 *
 * Bounded like the SDK's queue: at most `maxQueueSize` spans are on their way (sent and not yet taken
 * by the thread, or waiting to be sent); past that, spans are dropped and counted, and the drop is said
 * through OpenTelemetry's diagnostics as the SDK says its own ("Dropped N spans…"). If the thread
 * stops, spans are dropped until it is started again, on the next span a second later (or longer, up to
 * a minute, while threads stop before taking any).
 */
import { Worker } from 'node:worker_threads';
import { diag } from '@opentelemetry/api';
import type { SpanRecord } from './light-spans.js';
import type { TracingOptions } from './types.js';

const WORKER_URL = new URL('./export-worker.mjs', import.meta.url);
/** Spans sent to the thread in one message at most; fewer after `POST_DELAY_MS`. */
const POST_BATCH = 128;
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
}

export class ExportThread {
  private worker: Worker | undefined;
  private buffer: SpanRecord[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** Spans sent and not yet taken by the thread. */
  private inFlight = 0;
  private dropped = 0;
  private readonly maxQueue: number;
  private stoppedAt = -Infinity;
  private restartAfterMs = RESTART_AFTER_MS;
  /** The thread now running has taken spans. */
  private working = false;
  private shutDown = false;
  private nextId = 0;
  /** Flushes and shutdowns waiting for the thread's answer, by id. */
  private readonly waiters = new Map<number, () => void>();

  constructor(private readonly opts: ExportThreadOptions) {
    this.maxQueue = opts.batch?.maxQueueSize ?? envInt('OTEL_BSP_MAX_QUEUE_SIZE') ?? DEFAULT_MAX_QUEUE;
    this.start();
  }

  /** Queues an ended span for the thread (or drops it: see the class). */
  send(record: SpanRecord): void {
    if (this.shutDown) return;
    if (!this.worker && !this.start()) return this.drop();
    if (this.inFlight + this.buffer.length >= this.maxQueue) return this.drop();
    if (this.dropped > 0) this.sayDropped();
    this.buffer.push(record);
    if (this.buffer.length >= POST_BATCH) this.post();
    else this.timer ??= setTimeout(() => this.post(), POST_DELAY_MS).unref();
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
      workerData: { url, protocol: protocol ?? 'http/protobuf', headers, serviceName: serviceName ?? 'toolgraph', exportTimeoutMs: exportTimeoutMs ?? 10_000, batch, scope, nice: EXPORT_NICE },
    });
    // The thread never keeps the process alive: a flush or shutdown on exit waits for it, nothing else.
    worker.unref();
    worker.on('message', (m: { taken?: number; flushed?: number; error?: string; warn?: string }) => {
      // A shutdown is answered by the thread's end (`stopped` below).
      if (m.taken !== undefined) {
        this.inFlight -= m.taken;
        this.restartAfterMs = RESTART_AFTER_MS;
        this.working = true;
      } else if (m.flushed !== undefined) this.settle(m.flushed);
      else if (m.error !== undefined) this.opts.onError?.(m.error);
      else if (m.warn !== undefined) diag.warn(m.warn);
    });
    const stopped = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.stoppedAt = performance.now();
      // A thread that never took a span (its modules do not load, say) is not started every second.
      if (!this.working) this.restartAfterMs = Math.min(RESTART_AFTER_MAX_MS, this.restartAfterMs * 2);
      this.working = false;
      this.dropped += this.inFlight;
      this.inFlight = 0;
      this.settleAll();
      if (!this.shutDown) this.opts.onError?.(`the trace export thread stopped: ${why}`);
    };
    worker.on('error', (err) => stopped(err.message));
    worker.on('exit', (code) => stopped(`exit code ${code}`));
    this.worker = worker;
    return true;
  }

  private post(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.buffer.length === 0) return;
    const spans = this.buffer;
    this.buffer = [];
    if (!this.worker) {
      this.dropped += spans.length;
      return;
    }
    this.inFlight += spans.length;
    this.worker.postMessage({ spans });
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


  private drop(): void {
    if (this.dropped === 0) diag.debug('the trace export thread is behind (maxQueueSize reached), dropping spans');
    this.dropped++;
  }

  private sayDropped(): void {
    diag.warn(`Dropped ${this.dropped} spans because maxQueueSize reached (on their way to the export thread)`);
    this.dropped = 0;
  }
}

function envInt(name: string): number | undefined {
  const n = Number(process.env[name]);
  return Number.isInteger(n) && n > 0 ? n : undefined;
}
