/**
 * A server whose stdout and stderr are gone (the reader of its pipes died, as an `npx` wrapper does)
 * goes on serving, and still exits on SIGTERM within its drain time.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { startServer, type ServerChild } from '../helpers/child.js';

const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-serve-exit-'));
let server: ServerChild | undefined;
afterAll(async () => {
  await server?.kill9();
  rmSync(dir, { recursive: true, force: true });
});

it('with its stdout and stderr closed it still answers, and exits on SIGTERM within its drain time', async () => {
  const config = path.join(dir, 'toolgraph.yaml');
  writeFileSync(config, 'tools:\n  - { name: echo, executor: { kind: builtin, name: echo } }\n');
  server = await startServer({ config, db: path.join(dir, 'toolgraph.db'), drainMs: 1000, env: { LOG_LEVEL: 'info' } });
  server.proc.stdout?.destroy();
  server.proc.stderr?.destroy();
  // Requests make it log (info) into the closed pipe.
  for (let i = 0; i < 20; i++) {
    const r = await fetch(`${server.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ calls: [{ id: 'a', tool: 'echo', args: { i } }] }),
    });
    expect(r.status).toBe(201);
  }
  const t0 = Date.now();
  server.proc.kill('SIGTERM');
  const exit = await server.exited;
  expect(Date.now() - t0).toBeLessThan(1000 + 5000);
  expect(exit.signal).toBe(null);
}, 60_000);
