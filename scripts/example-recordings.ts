/**
 * Generates the example recordings of `examples/recordings/` by running real batches through the live
 * Engine under `examples/recordings/config.yaml`: builtin tools, plus two http tools served here by a
 * small test server (a search that fails its first attempts, so retries are real; a fetch that 404s).
 *
 * Run: `npx tsx scripts/example-recordings.ts [OUT_DIR]` (default examples/recordings). The tests call
 * `generateExamples` into a temporary directory and replay the fresh recordings too.
 */
import { writeFileSync, readFileSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseConfig } from '../src/config/load.js';
import type { Config } from '../src/contract/config.js';
import { recordLive, type LiveBatch, type LiveScript } from './record-live.js';

export const EXAMPLES_DIR = fileURLToPath(new URL('../examples/recordings/', import.meta.url));
export const EXAMPLE_CONFIG = path.join(EXAMPLES_DIR, 'config.yaml');
/** The port the example config's http tools name. */
export const EXAMPLE_PORT = 47651;

/** How many leading attempts of a search fail, by query (503, then 429 with Retry-After: 0). */
const FLAKY: Record<string, number> = { 'rust async runtimes': 2, 'tokio vs async-std': 1, 'site is down': Infinity };

/** The test server: POST /search and /fetch with the http executor's body `{ args, attempt, … }`. */
export function startToolServer(port = 0): Promise<Server & { port: number }> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const { args, attempt } = JSON.parse(body) as { args: Record<string, string>; attempt: number };
      const send = (status: number, json: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(json));
      };
      if (req.url === '/search') {
        const fails = FLAKY[args.q as string] ?? 0;
        if (attempt <= fails)
          return attempt % 2 === 1 ? send(503, { error: 'overloaded' }) : send(429, { error: 'slow down' }, { 'retry-after': '0' });
        return send(200, {
          q: args.q,
          hits: [
            `https://example.com/${encodeURIComponent(args.q as string)}/1`,
            `https://example.com/${encodeURIComponent(args.q as string)}/2`,
          ],
        });
      }
      if (req.url === '/fetch') {
        if ((args.url as string).includes('broken')) return send(404, { error: 'not found' });
        return send(200, { url: args.url, title: `Page at ${args.url}`, words: (args.url as string).length * 37 });
      }
      send(404, { error: 'no such tool' });
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(Object.assign(server, { port: (server.address() as AddressInfo).port })));
  });
}

/** The example config, with its http tools pointed at `port`. */
export function exampleConfig(port = EXAMPLE_PORT): Config {
  const text = readFileSync(EXAMPLE_CONFIG, 'utf8').replaceAll(`127.0.0.1:${EXAMPLE_PORT}`, `127.0.0.1:${port}`);
  return parseConfig(text, EXAMPLE_CONFIG, { baseDir: EXAMPLES_DIR });
}

export interface Example {
  name: string;
  batch: LiveBatch;
  script?: LiveScript;
}

export const EXAMPLES: Example[] = [
  {
    name: 'deploy-approval',
    batch: {
      runId: 'run_example_deploy_approval',
      tags: { pipeline: 'release' },
      calls: [
        { id: 'build', tool: 'build_image', args: { name: 'web', ms: 40 } },
        { id: 'tests', tool: 'run_tests', args: { ms: 60 } },
        { id: 'types', tool: 'typecheck', args: { ms: 25 } },
        { id: 'deploy', tool: 'deploy', args: { env: 'prod', name: 'web', build: '${build.output}' } },
        { id: 'announce', tool: 'notify', args: { text: 'web is live in ${deploy.output.env}' } },
      ],
    },
    script: { review: () => ({ decision: 'approve', comment: 'LGTM', delayMs: 30 }) },
  },
  {
    name: 'code-edit-hazards',
    batch: {
      runId: 'run_example_code_edit',
      calls: [
        { id: 'read_a', tool: 'read_file', args: { path: '/repo/src/a.ts' } },
        { id: 'read_b', tool: 'read_file', args: { path: '/repo/src/b.ts' } },
        { id: 'tests_before', tool: 'run_tests', args: { ms: 30 } },
        { id: 'edit_a', tool: 'write_file', args: { path: '/repo/src/a.ts', content: 'patched ${read_a.output.path}' } },
        { id: 'edit_b', tool: 'write_file', args: { path: '/repo/src/b.ts', content: 'patched' } },
        { id: 'types', tool: 'typecheck', args: { ms: 20 } },
        { id: 'tests_after', tool: 'run_tests', args: { ms: 40 } },
        { id: 'reread_a', tool: 'read_file', args: { path: '/repo/src/a.ts' } },
        { id: 'changelog', tool: 'write_file', args: { path: '/repo/CHANGELOG.md', content: 'fix a and b' } },
      ],
    },
  },
  {
    name: 'flaky-search-retries',
    batch: {
      runId: 'run_example_flaky_search',
      calls: [
        { id: 's1', tool: 'web_search', args: { q: 'rust async runtimes' } },
        { id: 's2', tool: 'web_search', args: { q: 'tokio vs async-std' } },
        { id: 's3', tool: 'web_search', args: { q: 'smol executor' } },
        { id: 's4', tool: 'web_search', args: { q: 'site is down' } },
        { id: 'sum', tool: 'summarize', args: { sources: ['${s1.output.hits}', '${s2.output.hits}', '${s3.output.hits}'] } },
      ],
    },
  },
  {
    name: 'replan-after-404',
    batch: {
      runId: 'run_example_replan',
      failure: 'replan',
      calls: [
        { id: 'page', tool: 'fetch_page', args: { url: 'https://docs.example.com/broken/guide' } },
        { id: 'faq', tool: 'fetch_page', args: { url: 'https://docs.example.com/faq' } },
        { id: 'digest', tool: 'summarize', args: { guide: '${page.output.title}', faq: '${faq.output.title}' } },
      ],
    },
    script: {
      replans: [
        {
          delayMs: 20,
          calls: [
            { id: 'mirror', tool: 'fetch_page', args: { url: 'https://mirror.example.org/guide' } },
            { id: 'digest2', tool: 'summarize', args: { guide: '${mirror.output.title}', faq: '${faq.output.title}' } },
          ],
        },
      ],
    },
  },
  {
    name: 'fail-fast-compensation',
    batch: {
      runId: 'run_example_fail_fast',
      calls: [
        { id: 'branch', tool: 'create_branch', args: { name: 'fix-123' } },
        { id: 'warmup', tool: 'sleep', args: { ms: 300 } },
        { id: 'tests', tool: 'run_tests', args: { ms: 30 } },
        { id: 'push', tool: 'shell', args: { cmd: 'git push origin ${branch.output.name}', message: 'remote rejected the push' } },
      ],
    },
  },
  {
    name: 'cancelled-build',
    batch: {
      runId: 'run_example_cancelled',
      calls: [
        { id: 'img_web', tool: 'build_image', args: { name: 'web', ms: 30 } },
        { id: 'img_api', tool: 'build_image', args: { name: 'api', ms: 400 } },
        { id: 'img_worker', tool: 'build_image', args: { name: 'worker', ms: 400 } },
        { id: 'tests', tool: 'run_tests', args: { ms: 400 } },
      ],
    },
    script: { cancelAfterMs: 80 },
  },
];

/** Runs every example on a real Engine and writes `<name>.json` recordings into `outDir`. */
export async function generateExamples(outDir: string, port = 0): Promise<string[]> {
  const server = await startToolServer(port);
  try {
    const config = exampleConfig(server.port);
    mkdirSync(outDir, { recursive: true });
    const files: string[] = [];
    for (const ex of EXAMPLES) {
      const { recording } = await recordLive(config, ex.batch, ex.script);
      const file = path.join(outDir, `${ex.name}.json`);
      writeFileSync(file, `${JSON.stringify(recording, null, 2)}\n`);
      files.push(file);
    }
    return files;
  } finally {
    await new Promise((r) => server.close(r));
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const out = process.argv[2] ?? EXAMPLES_DIR;
  const files = await generateExamples(out, EXAMPLE_PORT);
  for (const f of files) process.stdout.write(`wrote ${path.relative(process.cwd(), f)}\n`);
}
