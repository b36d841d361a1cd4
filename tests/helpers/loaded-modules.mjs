// Preloaded into a child process (`node --import=<this file>`): on exit, writes the paths of every
// CommonJS module the process loaded (`require.cache`, which also holds the CommonJS packages that ES
// modules imported) to the file named by LOADED_MODULES_OUT, as a JSON array. Given on node's command
// line (not NODE_OPTIONS), worker threads inherit it: each writes its own list, to that name plus
// `.thread-<id>`, when it ends by itself.
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isMainThread, threadId } from 'node:worker_threads';

const require = createRequire(import.meta.url);
const out = process.env.LOADED_MODULES_OUT;
const file = isMainThread ? out : `${out}.thread-${threadId}`;
if (out) process.on('exit', () => writeFileSync(`${file}`, JSON.stringify(Object.keys(require.cache))));
