/**
 * The adapters as a user meets them: each example under examples/ runs offline (its own fake model)
 * in a child process and prints the step's results with the read of /x after the write; and the
 * package's subpath exports `toolgraph/ai-sdk`, `toolgraph/langgraph` and `toolgraph/openai-agents`
 * resolve from dist/ (`npm run build`) and export what docs/adapters.md says.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/child.js';
import { orderOf } from '../helpers/file-tools.js';

const run = promisify(execFile);
const TSX = join(ROOT, 'node_modules/.bin/tsx');

describe('examples/', () => {
  it.each(['ai-sdk', 'langgraph', 'openai-agents'])('%s runs offline: the read of /x sees the write, /y runs beside it', async (name) => {
    const { stdout } = await run(TSX, [join(ROOT, `examples/${name}.ts`)], { cwd: ROOT, timeout: 60_000 });
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^call_w write_file → /);
    expect(lines[1]).toMatch(/^call_rx read_file → .*hello/);
    expect(lines[2]).toMatch(/^call_ry read_file → .*why/);
    expect(lines[3]).toMatch(/^order: /);
    expect(orderOf((lines[3] ?? '').slice('order: '.length).split(' | '))).toEqual({ readXAfterWrite: true, readYBesideWrite: true });
  });
});

describe('the subpath exports', () => {
  it('resolve from dist/ and export the adapters', async () => {
    expect(existsSync(join(ROOT, 'dist/adapters/ai-sdk.js')), 'dist/ is missing the adapters: npm run build').toBe(true);
    const script = `
      const out = {};
      for (const s of ['toolgraph/ai-sdk', 'toolgraph/langgraph', 'toolgraph/openai-agents']) out[s] = Object.keys(await import(s)).sort();
      console.log(JSON.stringify(out));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, timeout: 60_000 });
    expect(JSON.parse(stdout)).toEqual({
      'toolgraph/ai-sdk': ['ToolgraphCallError', 'toolgraphOf', 'withToolgraph'],
      'toolgraph/langgraph': ['ToolGraphNode', 'ToolgraphCallError', 'toolgraphOf'],
      'toolgraph/openai-agents': ['ToolgraphCallError', 'toolgraphOf', 'withToolgraph'],
    });
  });
});
