/**
 * Writes `openapi.yaml` at the repo root: the YAML form of the document `GET /openapi.json` serves
 * (`openApiDocument()` in src/api/openapi.ts). Run it after changing the API: `npm run openapi`.
 * tests/integration/openapi.test.ts fails while the file and the served document differ.
 *
 * `--check` writes nothing and exits 1 when the file is missing or out of date (for CI).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { openApiDocument } from '../src/api/openapi.js';

export const OPENAPI_YAML = fileURLToPath(new URL('../openapi.yaml', import.meta.url));

const HEADER =
  '# The toolgraph HTTP API (DESIGN §7), generated from src/api/openapi.ts by `npm run openapi`.\n# Do not edit by hand: GET /openapi.json serves the same document.\n';

/** The file's text for the current document. */
export function openApiYaml(): string {
  // No anchors and aliases: the file is for people and tools that read it as plain YAML.
  return HEADER + stringify(openApiDocument(), { aliasDuplicateObjects: false, lineWidth: 0 });
}

function main(args: string[]): number {
  const text = openApiYaml();
  if (args.includes('--check')) {
    const current = existsSync(OPENAPI_YAML) ? readFileSync(OPENAPI_YAML, 'utf8') : '';
    if (current === text) return 0;
    process.stderr.write(`${OPENAPI_YAML} is out of date: run npm run openapi\n`);
    return 1;
  }
  writeFileSync(OPENAPI_YAML, text);
  process.stderr.write(`wrote ${OPENAPI_YAML}\n`);
  return 0;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) process.exitCode = main(process.argv.slice(2));
