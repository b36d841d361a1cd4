/**
 * The main thread's side of the SQLite store's writer thread (writer.mjs): a second connection to the
 * same file that commits batches of writes, so that a commit's fsync (`synchronous = FULL`) blocks that
 * thread instead of the event loop. The store plans and checks every batch here first (batch.ts), so the
 * thread only runs statements.
 *
 * One batch at a time. A batch settles through a message on a MessagePort; `join` blocks until the one
 * in flight is done (Atomics.wait on a shared flag) and takes its reply off the port at once
 * (receiveMessageOnPort), for callers that must not go on before it is stored.
 */
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import type { PendingAppend } from './types.js';

export type Write = [statement: string, params: unknown[]];

interface Reply {
  error?: { message: string; code?: string; name?: string };
}

interface InFlight {
  resolve: () => void;
  reject: (err: Error) => void;
  onStored: () => void;
  error?: Error;
}

export class WriterThread {
  private readonly worker: Worker;
  private readonly port: MessagePort;
  /** Set to 1 by the thread once the reply to the batch in flight is posted. */
  private readonly flag = new Int32Array(new SharedArrayBuffer(4));
  private inFlight: InFlight | undefined;

  constructor(file: string, pragmas: readonly string[], statements: Record<string, string>) {
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    this.worker = new Worker(new URL('./writer.mjs', import.meta.url), {
      workerData: { file, pragmas, statements, port: port2, flag: this.flag },
      transferList: [port2],
    });
    // Neither keeps the process alive by itself; the port does while a batch is in flight (see `run`).
    this.worker.unref();
    this.port.on('message', (reply: Reply) => this.settle(reply));
    this.port.unref();
  }

  get busy(): boolean {
    return this.inFlight !== undefined;
  }

  /** Sends a batch; `onStored` runs once it is committed, before `done` resolves. */
  run(writes: Write[], onStored: () => void): PendingAppend {
    if (this.inFlight) throw new Error('the writer thread takes one batch at a time');
    let entry!: InFlight;
    const done = new Promise<void>((resolve, reject) => {
      entry = { resolve, reject, onStored };
    });
    // A caller that only uses `wait` must not leave a rejection unhandled.
    done.catch(() => {});
    this.inFlight = entry;
    Atomics.store(this.flag, 0, 0);
    this.port.ref();
    // As one JSON string: cloning it is a copy, where the structured clone of the rows' objects cost
    // the event loop about three times as much (every value is JSON already: strings, numbers, null).
    this.port.postMessage(JSON.stringify(writes));
    return {
      done,
      wait: () => {
        this.join();
        if (entry.error) throw entry.error;
      },
    };
  }

  /** Blocks until the batch in flight (if any) has settled. */
  join(): void {
    if (!this.inFlight) return;
    Atomics.wait(this.flag, 0, 0);
    const m = receiveMessageOnPort(this.port);
    if (m) this.settle(m.message as Reply);
  }

  /** Waits for the batch in flight, then closes the thread's connection and ends it. */
  close(): void {
    this.join();
    Atomics.store(this.flag, 0, 0);
    this.port.postMessage('close');
    Atomics.wait(this.flag, 0, 0);
    receiveMessageOnPort(this.port);
    this.port.close();
    void this.worker.terminate();
  }

  private settle(reply: Reply): void {
    const entry = this.inFlight;
    if (!entry) return;
    this.inFlight = undefined;
    this.port.unref();
    if (reply.error) {
      entry.error = Object.assign(new Error(reply.error.message), { name: reply.error.name ?? 'Error', code: reply.error.code });
      entry.reject(entry.error);
    } else {
      entry.onStored();
      entry.resolve();
    }
  }
}
