/**
 * The npm package as a user gets it: `npm pack` holds what a user needs and nothing else; the tarball
 * installs into a fresh project; there `npx toolgraph serve` (the demo) answers, `plan` and `replay`
 * work, the library runs, and the types of `toolgraph`, `toolgraph/client` and `toolgraph/stream`
 * resolve under `tsc`.
 *
 * The pack uses dist/ as built (`npm ci` builds it through `prepare`; locally, `npm run build`).
 * Dependencies install from npm's cache when it has them (`--prefer-offline`; CI's `npm ci` fills it),
 * with install scripts off: the one that matters, better-sqlite3's native build (about a minute from
 * source), is replaced by this checkout's compiled addon of the same pinned version.
 */
import { execFile, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/child.js';

const run = promisify(execFile);
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const NPX = process.platform === 'win32' ? 'npx.cmd' : 'npx';

let dir = '';
let project = '';
let files: string[] = [];

/** Whether any process of the group `-pgid` lives (signal 0 tests without sending). */
function groupAlive(group: number): boolean {
  try {
    process.kill(group, 0);
    return true;
  } catch {
    return false;
  }
}

async function npx(args: string[]) {
  try {
    const r = await run(NPX, ['--no-install', 'toolgraph', ...args], {
      cwd: project,
      env: { ...process.env, LOG_LEVEL: 'warn' },
      maxBuffer: 16 << 20,
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? -1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
  }
}

beforeAll(async () => {
  expect(existsSync(join(ROOT, 'dist/index.js')), 'dist/ is missing: npm run build').toBe(true);
  dir = mkdtempSync(join(tmpdir(), 'toolgraph-pack-'));
  const { stdout } = await run(NPM, ['pack', '--json', '--ignore-scripts', '--pack-destination', dir], { cwd: ROOT, maxBuffer: 16 << 20 });
  const [packed] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  files = packed!.files.map((f) => f.path);
  project = join(dir, 'app');
  cpSync(join(ROOT, 'examples/recordings/code-edit-hazards.json'), join(dir, 'rec.json'));
  writeFileSync(
    join(dir, 'batch.json'),
    JSON.stringify({
      calls: [
        { id: 'a', tool: 'sleep', args: { ms: 5 } },
        { id: 'b', tool: 'echo', args: { x: '${a.output.ms}' } },
      ],
    }),
  );
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true, type: 'module' }));
  await run(
    NPM,
    ['install', '--no-audit', '--no-fund', '--prefer-offline', '--ignore-scripts', '--no-package-lock', join(dir, packed!.filename)],
    {
      cwd: project,
      maxBuffer: 16 << 20,
    },
  );
  // better-sqlite3's addon: this checkout's build of the same version (its install script was skipped).
  const ours = JSON.parse(readFileSync(join(ROOT, 'node_modules/better-sqlite3/package.json'), 'utf8')) as { version: string };
  const theirs = JSON.parse(readFileSync(join(project, 'node_modules/better-sqlite3/package.json'), 'utf8')) as { version: string };
  expect(theirs.version).toBe(ours.version);
  cpSync(
    join(ROOT, 'node_modules/better-sqlite3/build/Release/better_sqlite3.node'),
    join(project, 'node_modules/better-sqlite3/build/Release/better_sqlite3.node'),
  );
}, 300_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('npm pack', () => {
  it('holds the compiled code, the CLI, the dashboard, the migrations, openapi.yaml, the docs, README, LICENSE and CHANGELOG', () => {
    for (const f of [
      'package.json',
      'README.md',
      'LICENSE',
      'CHANGELOG.md',
      'openapi.yaml',
      'bin/toolgraph.mjs',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/cli/main.js',
      'dist/client/index.d.ts',
      'dist/engine/model-stream.d.ts',
      'dist/dashboard/static/index.html',
      'docs/configuration.md',
    ]) {
      expect(files, f).toContain(f);
    }
    expect(
      files.some((f) => /^dist\/store\/migrations\/.+\.sql$/.test(f)),
      'migrations',
    ).toBe(true);
    expect(files.filter((f) => f.startsWith('docs/') && f.endsWith('.md')).length).toBeGreaterThan(3);
  });

  it('holds no tests, no TypeScript sources, no source maps and no build or CI files', () => {
    const unwanted = files.filter(
      (f) =>
        /^(tests|src|bench|scripts|\.ci)\//.test(f) ||
        /\.map$/.test(f) ||
        (/\.ts$/.test(f) && !/\.d\.ts$/.test(f)) ||
        /^(Dockerfile|docker-compose\.yml|tsconfig.*|vitest\.config\.ts|\.dockerignore)$/.test(f),
    );
    expect(unwanted).toEqual([]);
  });

  it('every file the package points at is in it', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      exports: Record<string, { types: string; default: string }>;
      bin: Record<string, string>;
    };
    for (const e of Object.values(pkg.exports)) for (const f of [e.types, e.default]) expect(files, f).toContain(f.replace(/^\.\//, ''));
    for (const f of Object.values(pkg.bin)) expect(files).toContain(f);
  });
});

describe('the installed package', () => {
  it('npx toolgraph serve (demo) answers /healthz, /docs and a run', async () => {
    const proc = spawn(NPX, ['--no-install', 'toolgraph', 'serve', '--port', '0', '--db', join(dir, 'demo.db'), '--drain-ms', '0'], {
      cwd: project,
      env: { ...process.env, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
      // A process group of its own: npx runs the server as a grandchild, so the whole group is ended.
      detached: true,
    });
    let err = '';
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no "serving" line in 30 s: ${err}`)), 30_000);
        proc.stderr!.setEncoding('utf8').on('data', (s: string) => {
          err += s;
          const m = /serving (http:\/\/\S+?) /.exec(err);
          if (m) {
            clearTimeout(timer);
            resolve(m[1]!);
          }
        });
        void exited.then((code) => reject(new Error(`serve exited with ${code}: ${err}`)));
      });
      const health = await fetch(`${url}/healthz`);
      expect(health.status).toBe(200);
      expect(((await health.json()) as { status: string }).status).toBe('ok');
      const docs = await fetch(`${url}/docs`);
      expect(docs.status).toBe(200);
      expect(await docs.text()).toContain('swagger-ui');
      const dashboard = await fetch(`${url}/`);
      expect(dashboard.status).toBe(200);
      const res = await fetch(`${url}/v1/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          waitMs: 10_000,
          calls: [
            { id: 'r', tool: 'read_file', args: { path: '/a' } },
            { id: 'w', tool: 'write_file', args: { path: '/a', content: '${r.output.path}' } },
          ],
        }),
      });
      expect(res.status).toBe(201);
      const body = (await res.json()) as { status: string; calls: { id: string; status: string; dependsOn: string[] }[] };
      expect(body.status).toBe('succeeded');
      expect(body.calls.map((c) => [c.id, c.status, c.dependsOn])).toEqual([
        ['r', 'succeeded', []],
        ['w', 'succeeded', ['r']],
      ]);
    } finally {
      // SIGTERM to the group (npx, its shell, the server), then SIGKILL to what is left after 10 s.
      const group = -(proc.pid as number);
      const signal = (sig: NodeJS.Signals) => {
        try {
          process.kill(group, sig);
        } catch {
          // The group is gone.
        }
      };
      signal('SIGTERM');
      const killer = setTimeout(() => signal('SIGKILL'), 10_000);
      await exited;
      // The wrapper's exit is not the server's: wait until no process of the group is left.
      for (let i = 0; i < 200 && groupAlive(group); i++) await new Promise((r) => setTimeout(r, 50));
      signal('SIGKILL');
      clearTimeout(killer);
      expect(groupAlive(group)).toBe(false);
    }
  }, 60_000);

  it('npx toolgraph plan and replay work there', async () => {
    const plan = await npx(['plan', join(dir, 'batch.json')]);
    expect(plan.code, plan.stderr).toBe(0);
    const graph = JSON.parse(plan.stdout) as { edges: { from: string; to: string; kind: string }[] };
    expect(graph.edges).toEqual([expect.objectContaining({ from: 'a', to: 'b', kind: 'data' })]);
    const replay = await npx(['replay', join(dir, 'rec.json')]);
    expect(replay.code, replay.stderr + replay.stdout).toBe(0);
    const diverging = JSON.parse(readFileSync(join(dir, 'rec.json'), 'utf8')) as { result: { status: string } };
    diverging.result.status = diverging.result.status === 'succeeded' ? 'failed' : 'succeeded';
    writeFileSync(join(dir, 'rec-diverging.json'), JSON.stringify(diverging));
    expect((await npx(['replay', join(dir, 'rec-diverging.json')])).code).toBe(1);
  }, 60_000);

  it('the library runs a batch (import "toolgraph")', async () => {
    const script = `import { createEngine } from 'toolgraph';
const engine = createEngine();
const run = await engine.submit({ calls: [{ id: 'a', tool: 'sleep', args: { ms: 5 } }, { id: 'b', tool: 'echo', args: { slept: '\${a.output.ms}' } }] });
const result = await engine.wait(run.id);
console.log(JSON.stringify([result.status, result.calls.map((c) => c.output)]));
await engine.close();`;
    writeFileSync(join(project, 'lib.mjs'), script);
    const { stdout } = await run(process.execPath, ['lib.mjs'], { cwd: project });
    expect(JSON.parse(stdout)).toEqual(['succeeded', [{ ms: 5 }, { slept: 5 }]]);
  }, 30_000);

  it('the types of toolgraph, toolgraph/client and toolgraph/stream resolve under tsc, and the TypeScript of docs/ compiles against them', async () => {
    // Every ```ts block of docs/, as a module of the user's project (the README's run in readme.test.ts).
    const snippets: string[] = [];
    for (const page of readdirSync(join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`)) {
      for (const m of readFileSync(join(ROOT, page), 'utf8').matchAll(/^```ts\n([\s\S]*?)^```/gm)) {
        const file = `snippet-${snippets.length}.ts`;
        writeFileSync(join(project, file), `// ${page}\n${m[1] as string}\nexport {};\n`);
        snippets.push(file);
      }
    }
    expect(snippets.length).toBeGreaterThanOrEqual(2);
    writeFileSync(
      join(project, 'main.ts'),
      `import { createEngine } from 'toolgraph';
import { ToolgraphClient } from 'toolgraph/client';
import { feedAnthropicStream, feedOpenAiStream } from 'toolgraph/stream';

const engine = createEngine();
const run = await engine.submit({ calls: [{ id: 'a', tool: 'echo', args: {} }] });
const id: string = run.id;
const tg = new ToolgraphClient({ baseUrl: 'http://127.0.0.1:8080' });
export async function go(): Promise<string | undefined> {
  const r = await tg.submit({ calls: [{ id: 'a', tool: 'echo', args: { x: 1 } }] }, { wait: true });
  return r.status + id + typeof feedOpenAiStream + typeof feedAnthropicStream;
}
// @ts-expect-error: a call needs a tool
void engine.submit({ calls: [{ id: 'a' }] });
`,
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: ['node'],
          typeRoots: [join(ROOT, 'node_modules/@types')],
        },
        files: ['main.ts', ...snippets],
      }),
    );
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    const result = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: project }).then(
      () => ({ code: 0, out: '' }),
      (e: { code: number; stdout: string }) => ({ code: e.code, out: e.stdout }),
    );
    expect(result.out).toBe('');
    expect(result.code).toBe(0);
  }, 120_000);
});
