#!/usr/bin/env node
// Entry point of the `toolgraph` command. It runs the compiled CLI from dist/ (built by `npm install`
// through the `prepare` script); in a checkout where dist/ is missing it runs the TypeScript sources
// through tsx instead, so the command works either way.
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const built = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
if (existsSync(built)) {
  const { main } = await import(pathToFileURL(built).href);
  process.exitCode = await main(process.argv.slice(2));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  const { main } = await import(new URL('../src/cli/main.ts', import.meta.url).href);
  process.exitCode = await main(process.argv.slice(2));
}
