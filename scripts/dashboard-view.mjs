// Writes src/dashboard/static/view.js: the run projection of src/core/view.ts (the one fold of a run's
// events into its view) as a plain ES module for the dashboard, which has no build step. view.ts
// imports only types, so its JavaScript stands alone. Next to it, view.d.ts: the declarations of
// view.ts (its type imports pointed back at src/core), so that the type check of the dashboard
// (tsconfig.dashboard.json) knows what the module holds. Run it after changing view.ts:
//   npm run dashboard-view
// tests/unit/dashboard-view.test.ts fails while either copy is out of date.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const SOURCE = new URL('../src/core/view.ts', import.meta.url);
export const TARGET = new URL('../src/dashboard/static/view.js', import.meta.url);
export const DECLARATIONS = new URL('../src/dashboard/static/view.d.ts', import.meta.url);

const HEADER = `// Generated from src/core/view.ts by scripts/dashboard-view.mjs: do not edit (a unit test checks that
// this copy is up to date). The dashboard folds a run's events with the server's own projection.
`;

const options = { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, removeComments: false };

/** The text view.js must have. */
export function generate() {
  const out = ts.transpileModule(readFileSync(SOURCE, 'utf8'), { compilerOptions: options });
  return HEADER + out.outputText;
}

/**
 * The text view.d.ts must have: view.ts's declarations (view.ts declares every exported type, so they
 * come from the file alone), its relative imports made relative to src/dashboard/static.
 */
export function generateDeclarations() {
  const out = ts.transpileDeclaration(readFileSync(SOURCE, 'utf8'), {
    fileName: fileURLToPath(SOURCE),
    reportDiagnostics: true,
    compilerOptions: options,
  });
  if (out.diagnostics?.length) {
    const text = out.diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('\n');
    throw new Error(`view.ts has declarations that need the type checker:\n${text}`);
  }
  return HEADER + out.outputText.replace(/(from ')\.\/([^']+')/g, '$1../../core/$2');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(TARGET, generate());
  writeFileSync(DECLARATIONS, generateDeclarations());
  console.log(`wrote ${fileURLToPath(TARGET)} and ${fileURLToPath(DECLARATIONS)}`);
}
