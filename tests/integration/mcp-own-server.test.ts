/**
 * MCP behaviour that the published servers cannot show, with the tests' own server
 * (tests/fixtures/mcp/test-server.mjs, the SDK's Server class on stdio): paging of tools/list,
 * list_changed refreshing the catalog for new runs, cancel and timeout sending notifications/cancelled,
 * isError, output_too_large, 2020-12 input schemas, an invalid schema skipped with a warning, a server
 * killed mid-call (idempotent: retried on the restarted server; otherwise a clear failure), name clashes
 * and unknown names as config errors, and a server that cannot start as exit 2 naming it.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { ConfigError, parseConfig } from '../../src/config/load.js';
import { startMcp } from '../../src/mcp/runtime.js';
import { memoryLogger, startToolgraph, TEST_SERVER, type Toolgraph } from '../helpers/mcp.js';

const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-mcp-own-'));
const LOG = path.join(dir, 'server.log');
const logLines = () => {
  try {
    return readFileSync(LOG, 'utf8').split('\n').filter(Boolean);
  } catch {
    return [];
  }
};
const node = JSON.stringify(process.execPath);
const server = (name: string, extra = '', env: Record<string, string> = {}) => `
    - name: ${name}
      command: ${node}
      args: [${JSON.stringify(TEST_SERVER)}]
      env: ${JSON.stringify({ LOG, ...env })}
${extra}`;

/** Resolves once `probe` is true, polling a file or a value: never a bare sleep. */
async function until(what: string, probe: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("the tests' own MCP server", () => {
  let tg: Toolgraph;
  beforeAll(async () => {
    tg = await startToolgraph(`
mcp:
  servers:${server(
    't',
    `      trustAnnotations: true
      tools:
        big: { maxOutputBytes: 1000 }
        slow: { timeoutMs: 300 }
        w: { writes: ["thing:{id}"] }
      include: ["*"]`,
    { BAD: '1', PAGE_SIZE: '2' },
  )}
`);
  });
  afterAll(async () => {
    await tg?.close();
  });

  it('lists every page of tools', () => {
    const names = tg.config.catalog.list().map((t) => t.name);
    expect(names).toEqual(['t__echo', 't__pid', 't__slow', 't__crash', 't__fail', 't__big', 't__grow', 't__modern', 't__w']);
    expect(logLines().filter((l) => l.startsWith('list'))).toEqual(['list 0', 'list 2', 'list 4', 'list 6', 'list 8']);
  });

  it('skips a tool whose input schema does not compile, with a warning that names it', () => {
    expect(tg.config.catalog.get('t__broken')).toBeUndefined();
    expect(tg.mcp.warnings).toEqual([expect.stringMatching(/^mcp server "t": tool "broken" skipped: its input schema does not compile: /)]);
  });

  it('calls a tool: structuredContent is the output; isError is tool_error with the text', async () => {
    const view = await tg.run([
      { id: 'e', tool: 't__echo', args: { text: 'hi' } },
      { id: 'f', tool: 't__fail', args: {} },
    ]);
    expect(view.calls[0]).toMatchObject({ status: 'succeeded', output: { text: 'hi' } });
    expect(view.calls[1]).toMatchObject({ status: 'failed', error: { code: 'tool_error', message: 'it broke' } });
  });

  it('checks args against a 2020-12 input schema', async () => {
    const view = await tg.run([
      { id: 'ok', tool: 't__modern', args: { pair: ['a', 1] } },
      { id: 'bad', tool: 't__modern', args: { pair: ['a', 'b'] } },
    ]);
    expect(view.calls[0]).toMatchObject({ status: 'succeeded', output: { ok: true } });
    expect(view.calls[1]?.status).toBe('failed');
    expect(view.calls[1]?.error).toMatchObject({ code: 'invalid_args' });
  });

  it("fails an output larger than the tool's maxOutputBytes with output_too_large", async () => {
    const view = await tg.run([
      { id: 'small', tool: 't__big', args: { n: 100 } },
      { id: 'large', tool: 't__big', args: { n: 5000 } },
    ]);
    expect(view.calls[0]?.status).toBe('succeeded');
    // The engine's one check, with the tool's own cap (from the server's tools: override).
    expect(view.calls[1]).toMatchObject({ status: 'failed', error: { code: 'output_too_large', details: { maxBytes: 1000 } } });
    expect(view.calls[1]?.error?.message).toBe("large: the output passes 1000 bytes of JSON (the tool's maxOutputBytes)");
  });

  it('on timeout sends notifications/cancelled to the server', async () => {
    const view = await tg.run([{ id: 's', tool: 't__slow', args: { ms: 30_000 } }]);
    expect(view.calls[0]).toMatchObject({ status: 'failed', error: { code: 'timeout' } });
    await until('the server to log the cancel', () => logLines().some((l) => l.startsWith('cancelled slow')));
  });

  it('on cancel sends notifications/cancelled to the server', async () => {
    const before = logLines().filter((l) => l.startsWith('cancelled')).length;
    const started = await tg.engine.submit({
      calls: [
        { id: 's', tool: 't__slow', args: { ms: 250 } },
        { id: 'e', tool: 't__echo', args: {} },
      ],
    });
    await until('the call to reach the server', () => logLines().filter((l) => l.startsWith('call slow')).length >= 2);
    await tg.engine.cancel(started.id);
    const view = await tg.engine.wait(started.id);
    expect(view?.calls[0]?.status).toBe('cancelled');
    await until('the server to log the cancel', () => logLines().filter((l) => l.startsWith('cancelled')).length > before);
  });

  it('refreshes the catalog on tools/list_changed, for new runs', async () => {
    expect(tg.config.catalog.get('t__extra')).toBeUndefined();
    const before = await tg.run([{ id: 'x', tool: 't__extra', args: {} }]);
    expect(before.calls[0]?.error?.code).toBe('unknown_tool');
    await tg.run([{ id: 'g', tool: 't__grow', args: {} }]);
    await until('the refresh', () => tg.config.catalog.get('t__extra') !== undefined);
    const after = await tg.run([{ id: 'x', tool: 't__extra', args: {} }]);
    expect(after.calls[0]).toMatchObject({ status: 'succeeded', output: { ok: true } });
  });
});

describe('a server killed mid-call', () => {
  it('retries an idempotent tool on the restarted server; fails a non-idempotent one clearly, and the next call restarts it', async () => {
    const tg = await startToolgraph(`
mcp:
  servers:${server(
    'idem',
    `      trustAnnotations: true
      tools:
        crash: { retry: { attempts: 3, backoffMs: 10 } }`,
    { MARKER: path.join(dir, 'idem.marker') },
  )}${server('once', '', { MARKER: path.join(dir, 'once.marker') })}
`);
    try {
      const first = readFileSync.bind(null, path.join(dir, 'idem.marker'), 'utf8');
      const view = await tg.run([{ id: 'c', tool: 'idem__crash', args: {} }]);
      expect(view.calls[0]).toMatchObject({ status: 'succeeded', attempts: 2 });
      const crashedPid = Number(first());
      expect((view.calls[0]?.output as { pid: number } | undefined)?.pid).not.toBe(crashedPid);

      const plain = await tg.run([{ id: 'c', tool: 'once__crash', args: {} }]);
      expect(plain.calls[0]).toMatchObject({ status: 'failed', attempts: 1, error: { code: 'tool_error' } });
      expect(plain.calls[0]?.error?.message).toMatch(/mcp server "once" .*connection/);
      const next = await tg.run([{ id: 'again', tool: 'once__crash', args: {} }]);
      expect(next.calls[0]).toMatchObject({ status: 'succeeded', output: { pid: expect.any(Number) } });
    } finally {
      await tg.close();
    }
  });
});

describe('config checks on the merged catalog', () => {
  const start = (yaml: string) => startMcp(parseConfig(yaml, 'test.yaml', { env: {} }), { logger: memoryLogger() });

  it('a name that clashes with a config tool or another server is a config error', async () => {
    const err = await start(`
tools:
  - { name: t__echo, executor: { kind: builtin, name: echo } }
mcp:
  servers:${server('t')}${server('u', '      prefix: t__')}
`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    const msg = (err as Error).message;
    expect(msg).toContain('mcp.servers[0]: the tool "echo" becomes "t__echo", a name already used by tools[0]');
    expect(msg).toContain('mcp.servers[1]: the tool "pid" becomes "t__pid", a name already used by the tool "pid" of mcp server "t"');
  });

  it('names in after, requires, compensate, limits.tool and policy are checked against the MCP tools too', async () => {
    const ok = await start(`
tools:
  - { name: echo, executor: { kind: builtin }, after: [t__w] }
limits: { tool: { t__slow: 2 } }
policy: { rules: [{ match: { tool: t__w }, requires: [t__echo] }] }
mcp:
  servers:${server('t')}
`);
    expect(ok.config.limits.tool).toEqual({ t__slow: 2 });
    await ok.close();
    const err = await start(`
tools:
  - { name: echo, executor: { kind: builtin }, after: [t__nope] }
limits: { tool: { t__gone: 2 } }
mcp:
  servers:${server(
    't',
    `      tools:
        w: { requires: [nothing_here] }
        crash: { retry: { attempts: 2 } }
        missing: { idempotent: true }`,
  )}
`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    const msg = (err as Error).message;
    expect(msg).toContain('tools[0].after[0]: expected the name of a tool of the catalog, or a glob, got "t__nope"');
    expect(msg).toContain('limits.tool.t__gone');
    expect(msg).toContain('mcp.servers[0].tools.w.requires[0]');
    expect(msg).toContain('mcp.servers[0].tools.crash.retry: retry needs idempotent: true');
    expect(msg).toContain('mcp.servers[0].tools.missing: expected the name of a tool the server lists');
  });

  it("an untrusted server's tools are opaque: they write *, and hints are ignored", async () => {
    const rt = await start(`
mcp:
  servers:${server('t')}
`);
    expect(rt.config.catalog.get('t__echo')).toMatchObject({ reads: [], writes: ['*'], risk: 'write', idempotent: false });
    await rt.close();
  });
});

describe('a server that cannot start', () => {
  it('is exit 2 within 10 s, naming the server and showing its stderr', async () => {
    const cfg = path.join(dir, 'dead.yaml');
    writeFileSync(
      cfg,
      `
mcp:
  servers:
    - name: dead
      command: ${node}
      args: ["-e", "console.error('dead: missing API token'); process.exit(3)"]
`,
    );
    let err = '';
    const t0 = Date.now();
    const code = await main(['tools', '--config', cfg], { out: () => {}, err: (s) => void (err += s), isTTY: false });
    expect(code).toBe(2);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(err).toMatch(/mcp server "dead" could not start/);
    expect(err).toContain('dead: missing API token');
  });

  it('a server that never answers initialize is exit 2 within 10 s', async () => {
    const cfg = path.join(dir, 'mute.yaml');
    writeFileSync(
      cfg,
      `
mcp:
  servers:
    - name: mute
      command: ${node}
      args: ["-e", "console.error('mute: waiting for nothing'); setInterval(() => {}, 1000)"]
`,
    );
    let err = '';
    const t0 = Date.now();
    const code = await main(['tools', '--config', cfg], { out: () => {}, err: (s) => void (err += s), isTTY: false });
    expect(code).toBe(2);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(err).toMatch(/mcp server "mute" could not start .*: no answer to initialize within 8000 ms/);
    expect(err).toContain('mute: waiting for nothing');
  }, 20_000);

  it('an unreachable url is exit 2 naming the server', async () => {
    const cfg = path.join(dir, 'gone.yaml');
    writeFileSync(
      cfg,
      `
mcp:
  servers:
    - name: gone
      url: http://127.0.0.1:9/mcp
`,
    );
    const batch = path.join(dir, 'batch.json');
    writeFileSync(batch, JSON.stringify([{ id: 'a', tool: 'gone__x' }]));
    let err = '';
    const t0 = Date.now();
    const code = await main(['plan', batch, '--config', cfg], { out: () => {}, err: (s) => void (err += s), isTTY: false });
    expect(code).toBe(2);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(err).toMatch(/mcp server "gone" could not be reached at http:\/\/127\.0\.0\.1:9\/mcp/);
  });
});
