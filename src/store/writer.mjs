// The SQLite store's writer thread (see WriterThread in sqlite.ts). It holds a second connection to the
// database file and runs each batch of writes it is sent in one IMMEDIATE transaction, so that the
// commit, and the fsync that `synchronous = FULL` makes part of it, happen off the main thread.
//
// It knows no SQL of its own: the main thread sends the statements (by name) when it starts the thread,
// and then batches of [statement name, parameters], as JSON text. Plain JS, like worker-boot.mjs: a worker thread
// starts without the TypeScript loader that runs the sources under tsx or vitest.
//
// Protocol: one batch at a time. After each, the reply ({} or { error }) is posted first, then `flag[0]`
// is set to 1 and notified, so a main thread blocked in Atomics.wait finds the reply already queued.
import { workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

const { file, pragmas, statements, port, flag } = workerData;

let db;
let write;
let broken;
try {
  db = new Database(file);
  for (const p of pragmas) db.pragma(p);
  const prepared = Object.fromEntries(Object.entries(statements).map(([name, sql]) => [name, db.prepare(sql)]));
  const tx = db.transaction((writes) => {
    for (const [name, params] of writes) prepared[name].run(...params);
  });
  write = (writes) => tx.immediate(writes);
} catch (err) {
  // Every batch is then refused with this error (a hung main thread would be worse).
  broken = err;
}

port.on('message', (msg) => {
  let reply = {};
  try {
    if (msg === 'close') db?.close();
    else if (broken) throw broken;
    else write(JSON.parse(msg));
  } catch (err) {
    reply = { error: { message: err?.message ?? String(err), code: err?.code, name: err?.name } };
  }
  port.postMessage(reply);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
  if (msg === 'close') port.close();
});
