// Preloaded into a child process (`node --import=<this file>`): on exit, writes the paths of every
// CommonJS module the process loaded (`require.cache`, which also holds the CommonJS packages that ES
// modules imported) to the file named by LOADED_MODULES_OUT, as a JSON array.
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const out = process.env.LOADED_MODULES_OUT;
if (out) process.on('exit', () => writeFileSync(out, JSON.stringify(Object.keys(require.cache))));
