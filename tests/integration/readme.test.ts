/**
 * The README's examples run: the curl commands of the tour and of the OpenAI/Anthropic sections
 * against a real server (the demo catalog), the recording they fetch replayed by the real CLI, and the
 * TypeScript snippets of the Integrations section (with `from 'toolgraph…'` pointed at the sources).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from '../../src/api/server.js';
import { Service } from '../../src/api/service.js';
import { loadConfig, parseConfig } from '../../src/config/load.js';
import { openSqliteStore } from '../../src/store/sqlite.js';

const run = promisify(execFile);
const readme = readFileSync('README.md', 'utf8');
const blocks = (lang: string) =>
  [...readme.matchAll(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``, 'g'))].map((m) => (m[1] as string).replace(/^ {3}/gm, ''));

/** The shell commands of the README that talk to the server, in order, joined across continuation lines. */
function curlCommands(): string[] {
  const out: string[] = [];
  for (const block of blocks('sh')) {
    let current = '';
    for (const line of block.split('\n')) {
      if (line.startsWith('curl ') || line.startsWith('npx toolgraph replay rec.json')) current = line;
      else if (current && !line.startsWith('#') && !line.startsWith('npx') && line.trim() !== '') current += `\n${line}`;
      else if (current) {
        out.push(current);
        current = '';
      }
      if (current && (current.match(/'/g)?.length ?? 0) % 2 === 0 && !current.endsWith('\\')) {
        out.push(current.replace(/\s+#.*$/, ''));
        current = '';
      }
    }
    if (current) out.push(current);
  }
  return out;
}

let url = '';
let service: Service;
let close: () => Promise<void>;
const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-readme-'));

beforeAll(async () => {
  const store = openSqliteStore(path.join(dir, 'toolgraph.db'));
  service = new Service({ config: loadConfig(), store });
  const app = buildServer({ service });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address() as { port: number };
  url = `http://127.0.0.1:${address.port}`;
  close = async () => {
    await app.close();
    await service.engine.close();
    await store.close();
  };
});
afterAll(() => close());

describe('README', () => {
  it('starts with the two set-up commands', () => {
    const first = blocks('sh')[0] as string;
    expect(first).toMatch(/^npm install && npm start/m);
    expect(first).toMatch(/^npm test/m);
  });

  it('shows a configuration that loads', () => {
    const yaml = /```yaml\n([\s\S]*?)```/.exec(readme)?.[1];
    const config = parseConfig(yaml as string, 'README.md', { env: { TOOLGRAPH_AGENT_KEY: 'a', TOOLGRAPH_OPERATOR_KEY: 'o' } });
    expect(config.tools.map((t) => t.name)).toContain('deploy_image');
  });

  // The server runs in this process: commands run asynchronously, or they would wait on a blocked loop.
  it('runs the tour and the model-format examples against a real server', async () => {
    const commands = curlCommands();
    expect(commands.length).toBeGreaterThanOrEqual(6);
    let runId = '';
    for (const raw of commands) {
      const cmd = raw.replaceAll('http://127.0.0.1:8080', url).replaceAll('RUN_ID', runId);
      if (cmd.startsWith('npx toolgraph replay')) {
        const { stdout: out } = await run('node', [path.resolve('bin/toolgraph.mjs'), 'replay', 'rec.json'], {
          cwd: dir,
          encoding: 'utf8',
        });
        expect(out).toMatch(/^MATCH /m);
        continue;
      }
      const { stdout: out } = await run('bash', ['-c', cmd], { cwd: dir, encoding: 'utf8' });
      if (cmd.includes('> rec.json')) {
        expect(JSON.parse(readFileSync(path.join(dir, 'rec.json'), 'utf8')).format).toBe('toolgraph.recording/v1');
        continue;
      }
      const body = JSON.parse(out);
      expect(body.error, `${cmd}\n→ ${out}`).toBeUndefined();
      if (cmd.includes('/messages?format=openai')) expect(body[0].role).toBe('tool');
      else if (cmd.includes('/messages?format=anthropic')) expect(body[0].content[0].type).toBe('tool_result');
      else {
        expect(['succeeded', 'partial']).toContain(body.status);
        runId = body.id;
      }
    }
  });

  it('runs the library and client snippets', async () => {
    const snippets = blocks('ts');
    expect(snippets.length).toBeGreaterThanOrEqual(3);
    const header = [
      `const openaiStream = [{ choices: [{ delta: { tool_calls: [{ index: 0, id: 'call_1', function: { name: 'echo', arguments: '{"x":1}' } }] } }] }, { choices: [{ delta: {}, finish_reason: 'tool_calls' }] }];`,
    ].join('\n');
    for (const [i, snippet] of snippets.entries()) {
      const code = snippet
        .replaceAll("from 'toolgraph/client'", `from '${path.resolve('src/client/index.js')}'`)
        .replaceAll("from 'toolgraph/stream'", `from '${path.resolve('src/engine/model-stream.js')}'`)
        .replaceAll("from 'toolgraph'", `from '${path.resolve('src/index.js')}'`)
        .replaceAll('http://127.0.0.1:8080', url);
      const file = path.join(path.resolve('tests'), `.readme-snippet-${i}.tmp.ts`);
      writeFileSync(file, `${header}\nexport {};\n${code}`);
      try {
        await import(/* @vite-ignore */ file);
      } finally {
        (await import('node:fs')).rmSync(file, { force: true });
      }
    }
  });
});
