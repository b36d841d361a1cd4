/**
 * The main thread's side of the SQLite store's writer thread (writer.mjs): a second connection to the
 * same file that commits batches of writes, so that a commit's fsync (`synchronous = FULL`) blocks that
 * thread instead of the event loop. The store plans and checks every batch here first (batch.ts), so the
 * thread only runs statements.
 *
 * Several batches may be in flight (a pipeline): the thread commits them in order, all those waiting in
 * one transaction, and settles each through a reply on a MessagePort, in order. A batch is planned on top
 * of the ones before it, so when one fails, the thread refuses every later one (nothing of them is
 * stored) until it gets 'reset', which this side sends as soon as it reads the failure: batches sent
 * after that are planned from what the file holds. `join` blocks until every batch sent so far has
 * settled (Atomics.wait on a shared counter of settled batches) and takes their replies off the port at
 * once (receiveMessageOnPort), for callers that must not go on before they are stored.
 */
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';

/** A batch under way on the thread. */
export interface PendingAppend {
  /** Settles once the batch is stored, or rejects with why it was not (nothing of it is). */
  readonly done: Promise<void>;
  /** Blocks the calling thread until then; throws what `done` rejects with. */
  wait(): void;
}

export type Write = [statement: string, params: unknown[]];

interface Reply {
  error?: { message: string; code?: string; name?: string };
  /** An earlier batch failed, so this one was not tried. */
  refused?: boolean;
}

interface InFlight {
  /** Its number among the batches sent (see `settled`). */
  n: number;
  resolve: () => void;
  reject: (err: Error) => void;
  onStored: () => void;
  onFailed: () => void;
  error?: Error;
}

export class WriterThread {
  private readonly worker: Worker;
  private readonly port: MessagePort;
  /** How many messages the thread has settled (batches, and 'close'); it adds to it after posting their replies. */
  private readonly flag = new Int32Array(new SharedArrayBuffer(4));
  /** Batches sent and not yet settled, oldest first. */
  private readonly inFlight: InFlight[] = [];
  /** How many messages that get a reply were sent (wraps like the shared counter). */
  private sent = 0;

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

  /** Batches sent and not settled yet. */
  get pending(): number {
    return this.inFlight.length;
  }

  /**
   * Sends a batch, its writes as text (writes-codec.mjs), to be committed after every batch sent before
   * it; `onStored` runs once it is committed, before `done` resolves; `onFailed` once it is known not to
   * be (it failed, or one before it).
   */
  run(writes: string, onStored: () => void, onFailed: () => void): PendingAppend {
    let entry!: InFlight;
    const n = (this.sent = (this.sent + 1) | 0);
    const done = new Promise<void>((resolve, reject) => {
      entry = { n, resolve, reject, onStored, onFailed };
    });
    // A caller that only uses `wait` must not leave a rejection unhandled.
    done.catch(() => {});
    if (this.inFlight.length === 0) this.port.ref();
    this.inFlight.push(entry);
    // One string: cloning it is a copy, where the structured clone of the rows' objects cost the event
    // loop about three times as much.
    this.port.postMessage(writes);
    return {
      done,
      wait: () => {
        this.join(n);
        if (entry.error) throw entry.error;
      },
    };
  }

  /** Blocks until batch `n` (default: every batch sent) has settled. */
  join(n = this.sent): void {
    while (this.inFlight.length > 0 && (((this.inFlight[0] as InFlight).n - n) | 0) <= 0) {
      const settled = Atomics.load(this.flag, 0);
      if (((settled - n) | 0) < 0) Atomics.wait(this.flag, 0, settled);
      for (let m = receiveMessageOnPort(this.port); m; m = receiveMessageOnPort(this.port)) this.settle(m.message as Reply);
    }
  }

  /** Waits for the batches in flight, then closes the thread's connection and ends it. */
  close(): void {
    this.join();
    const n = (this.sent = (this.sent + 1) | 0);
    this.port.postMessage('close');
    while (((Atomics.load(this.flag, 0) - n) | 0) < 0) Atomics.wait(this.flag, 0, Atomics.load(this.flag, 0));
    receiveMessageOnPort(this.port);
    this.port.close();
    void this.worker.terminate();
  }

  private settle(reply: Reply): void {
    const entry = this.inFlight.shift();
    if (!entry) return;
    if (this.inFlight.length === 0) this.port.unref();
    if (reply.error) {
      // The thread refuses every batch after this one until told: batches sent from now on are planned
      // from what the file holds, so they may go in.
      if (!reply.refused) this.port.postMessage('reset');
      entry.error = Object.assign(new Error(reply.error.message), { name: reply.error.name ?? 'Error', code: reply.error.code });
      entry.onFailed();
      entry.reject(entry.error);
    } else {
      entry.onStored();
      entry.resolve();
    }
  }
}
