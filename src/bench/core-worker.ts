/**
 * Runs the core part of the suite in a worker thread of its own (see `runCoreIsolated`): a fresh
 * V8 isolate, so the heap that the makespan part left behind (and its garbage collections) is not
 * charged to the scheduler's figures, and the 100k-node runs do not tax the HTTP part after them.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { createBuiltinExecutor } from '../executors/builtin.js';
import { runCore, type CoreOptions } from './core.js';

const port = parentPort;
if (!port) throw new Error('core-worker.js runs in a worker thread');
const executor = createBuiltinExecutor();
try {
  const result = await runCore({ ...(workerData as Omit<CoreOptions, 'log'>), log: (line) => port.postMessage({ log: line }) }, executor);
  port.postMessage({ result });
} finally {
  await executor.close();
}
