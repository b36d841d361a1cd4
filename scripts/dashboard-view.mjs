// Writes src/dashboard/static/view.js: the run projection of src/core/view.ts (the one fold of a run's
// events into its view) as a plain ES module for the dashboard, which has no build step. view.ts
// imports only types, so its JavaScript stands alone. Run it after changing view.ts:
//   npm run dashboard-view
// tests/unit/dashboard-view.test.ts fails while the copy is out of date.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const SOURCE = new URL('../src/core/view.ts', import.meta.url);
export const TARGET = new URL('../src/dashboard/static/view.js', import.meta.url);

const HEADER = `// Generated from src/core/view.ts by scripts/dashboard-view.mjs: do not edit (a unit test checks that
// this copy is up to date). The dashboard folds a run's events with the server's own projection.
`;

/** The text view.js must have. */
export function generate() {
  const out = ts.transpileModule(readFileSync(SOURCE, 'utf8'), {
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, removeComments: false },
  });
  return HEADER + out.outputText;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(TARGET, generate());
  console.log(`wrote ${fileURLToPath(TARGET)}`);
}
