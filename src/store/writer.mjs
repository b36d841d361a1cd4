// The SQLite store's writer thread (see WriterThread in writer-thread.ts). It holds a second connection to
// the database file and commits the batches of writes it is sent, so that the commit, and the fsync that
// `synchronous = FULL` makes part of it, happen off the main thread.
//
// It knows no SQL of its own: the main thread sends the statements (by name) when it starts the thread,
// and then batches of [statement name, parameters], as text (writes-codec.mjs). Plain JS, like
// worker-boot.mjs: a worker thread starts without the TypeScript loader that runs the sources under tsx
// or vitest.
//
// Protocol. Batches come in order, several may be waiting, and each gets one reply, in the same order:
// `{}` (committed), `{ error }` (this batch broke, nothing of it is stored) or `{ error, refused: true }`
// (an earlier batch broke). Every batch waiting when the thread looks are committed together, in one
// IMMEDIATE transaction (one fsync); if that fails, they are committed one by one, in order, until one
// fails. A batch is planned by the main thread on top of the ones before it, so once one fails, every
// later batch is refused, until the main thread, told of the failure, sends 'reset' (it plans what comes
// after that from what the file holds). After the replies of a round are posted, `flag[0]` grows by their
// number and is notified, so a main thread blocked in Atomics.wait finds them already queued.
import { receiveMessageOnPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { decodeWrites } from './writes-codec.mjs';

/**
 * What the main thread starts the thread with (WriterThread in writer-thread.ts).
 * @typedef {object} WriterData
 * @property {string} file
 * @property {string[]} pragmas
 * @property {Record<string, string>} statements SQL by name
 * @property {import('node:worker_threads').MessagePort} port
 * @property {Int32Array} flag settled batches, counted up
 */
/** @typedef {{ message: string, code?: unknown, name?: unknown }} ErrorReply */
/** @typedef {{ error?: ErrorReply, refused?: true }} Reply */

const { file, pragmas, statements, port, flag } = /** @type {WriterData} */ (workerData);

/** @type {import('better-sqlite3').Database | undefined} */
let db;
/** @type {(batches: [string, unknown[]][][]) => void} */
let writeAll = () => {};
/** @type {unknown} */
let broken;
try {
  const conn = new Database(file);
  db = conn;
  for (const p of pragmas) conn.pragma(p);
  const prepared = Object.fromEntries(Object.entries(statements).map(([name, sql]) => [name, conn.prepare(sql)]));
  const tx = conn.transaction((/** @type {[string, unknown[]][][]} */ batches) => {
    for (const writes of batches)
      for (const [name, params] of writes) /** @type {import('better-sqlite3').Statement} */ (prepared[name]).run(...params);
  });
  writeAll = (batches) => {
    tx.immediate(batches);
  };
} catch (err) {
  // Every batch is then refused with this error (a hung main thread would be worse).
  broken = err;
}

/** Set when a batch failed: later batches are refused until 'reset'. */
let failed = false;

/**
 * @param {unknown} err
 * @returns {ErrorReply}
 */
const errorOf = (err) => {
  const e = /** @type {{ message?: string, code?: unknown, name?: unknown } | null | undefined} */ (err);
  return { message: e?.message ?? String(err), code: e?.code, name: e?.name };
};

/**
 * Commits the batches of one round; returns a reply for each.
 * @param {string[]} batches each the text of its writes
 * @returns {Reply[]}
 */
function commit(batches) {
  /** @type {Reply[]} */
  const replies = [];
  let i = 0;
  if (!failed && batches.length > 0) {
    try {
      if (broken) throw broken;
      writeAll(batches.map((b) => decodeWrites(b)));
      return batches.map(() => ({}));
    } catch (err) {
      if (batches.length === 1) {
        failed = true;
        return [{ error: errorOf(err) }];
      }
    }
    // One by one, so that only the batch that breaks fails (and those after it are refused).
    for (; i < batches.length; i++) {
      try {
        writeAll([decodeWrites(/** @type {string} */ (batches[i]))]);
        replies.push({});
      } catch (err) {
        failed = true;
        replies.push({ error: errorOf(err) });
        i++;
        break;
      }
    }
  }
  for (; i < batches.length; i++)
    replies.push({ error: { message: 'refused: an earlier batch was not stored', code: 'batch_refused' }, refused: true });
  return replies;
}

/** @param {string} first a batch's text, 'reset' or 'close' */
function round(first) {
  // Every message waiting now, in order: batches between controls are committed together.
  const msgs = [first];
  for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) msgs.push(m.message);
  /** @type {string[]} */
  let batches = [];
  let settled = 0;
  const flushBatches = () => {
    for (const reply of commit(batches)) port.postMessage(reply);
    settled += batches.length;
    batches = [];
  };
  for (const msg of msgs) {
    if (msg === 'reset' || msg === 'close') {
      flushBatches();
      if (msg === 'reset') failed = false;
      else {
        db?.close();
        port.postMessage({});
        settled += 1;
      }
    } else batches.push(msg);
  }
  flushBatches();
  Atomics.add(flag, 0, settled);
  Atomics.notify(flag, 0);
  if (msgs.includes('close')) port.close();
}

port.on('message', round);
