// Copies the non-TypeScript files that the compiled code loads at run time (SQL migrations, the
// dashboard's static files, worker boot files) from src/ to dist/, keeping their paths.
import { cpSync, existsSync, readdirSync, statSync } from 'node:fs';
import { join, extname } from 'node:path';

const ASSETS = new Set(['.sql', '.mjs', '.html', '.css', '.js', '.svg', '.yaml']);

/** @param {string} dir */
function copy(dir) {
  for (const name of readdirSync(dir)) {
    const from = join(dir, name);
    if (statSync(from).isDirectory()) copy(from);
    else if (ASSETS.has(extname(name))) cpSync(from, from.replace(/^src/, 'dist'));
  }
}
if (existsSync('src')) copy('src');
