/**
 * Flow control's waits in the dashboard (DESIGN §4, issue item 6), in a real browser against a real
 * server: a call held back by a keyed limit says "waiting for repo acme (2 of 2) held by run … / call …",
 * a call of a tool paused by a 429 says "paused until 12:04:05 by a 429 from api", and the Limits page
 * lists the busy key and the paused tool.
 *
 * Without Chromium this suite is skipped locally; with CI=true it fails (see helpers/browser.ts).
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  HAS_CHROMIUM,
  IS_CI,
  launchBrowser,
  MISSING_BROWSER,
  startDashboard,
  watchErrors,
  type DashboardServer,
} from '../helpers/browser.js';
import { ToolServer } from '../helpers/toolserver.js';

const yaml = (ts: ToolServer) => `
tools:
  - name: touch
    input: { type: object }
    reads: []
    writes: ["repo:{name}"]
    scope: run
    idempotent: true
    executor: { kind: builtin, name: sleep }
  - name: api
    input: { type: object }
    reads: []
    writes: []
    idempotent: true
    retry: { attempts: 3, backoffMs: 10, maxBackoffMs: 10 }
    executor: { kind: http, url: "${ts.url('/api')}" }
limits:
  each: { "repo:*": 2 }
`;

const suite = HAS_CHROMIUM || IS_CI ? describe : describe.skip;

suite('dashboard: flow control waits (browser)', () => {
  let browser: Browser;
  let server: DashboardServer;
  let ts: ToolServer;
  let context: BrowserContext;
  let page: Page;
  let errors: string[];

  beforeAll(async () => {
    if (!HAS_CHROMIUM) throw new Error(MISSING_BROWSER);
    ts = await ToolServer.start();
    // The backend pushes back for 30 s: long enough to read the pause in the page.
    ts.on('/api', () => ({ status: 429, body: { error: 'slow down' }, headers: { 'retry-after': '30' } }));
    [browser, server] = await Promise.all([launchBrowser(), startDashboard(yaml(ts))]);
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await ts?.close();
  });

  async function open(hash: string): Promise<Page> {
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await context.newPage();
    page.setDefaultTimeout(8000);
    errors = watchErrors(page);
    await page.goto(`${server.url}/${hash}`);
    return page;
  }

  afterEach(async () => {
    await context?.close();
    expect(errors ?? []).toEqual([]);
  });

  const body = () => page.locator('body').innerText();

  it('a call held back by a keyed limit says which key, how full, and who holds it; the Limits page lists the key', async () => {
    const runs = [];
    for (let i = 0; i < 3; i++)
      runs.push(await server.submit({ calls: [{ id: `t${i}`, tool: 'touch', args: { name: 'acme', ms: 20_000 } }] }));
    await open(`#/runs/${runs[2].id}`);
    await expect.poll(body).toMatch(/waiting for repo acme \(2 of 2\) held by run run_\S+ \/ call t[01]/);
    await page.goto(`${server.url}/#/limits`);
    const row = page.locator('.busy-keys tr[data-key="repo:acme"]');
    await expect.poll(() => row.innerText()).toMatch(/repo:acme\s+repo:\*\s+2 of 2/);
    for (const r of runs) await server.api('POST', `/v1/runs/${r.id}/cancel`);
  });

  it('a call of a tool paused by a 429 says until when and why; the Limits page lists the paused tool', async () => {
    await server.submit({ calls: [{ id: 'first', tool: 'api', args: {} }] });
    await expect.poll(() => ts.requests.filter((r) => r.path === '/api').length).toBeGreaterThan(0);
    const waiting = await server.submit({ calls: [{ id: 'second', tool: 'api', args: {} }] });
    await open(`#/runs/${waiting.id}`);
    await expect.poll(body).toMatch(/paused until \d\d:\d\d:\d\d by a 429 from api/);
    await page.goto(`${server.url}/#/limits`);
    await expect
      .poll(() => page.locator('.paused-tools li[data-tool="api"]').innerText())
      .toMatch(/^api paused until \d\d:\d\d:\d\d by a 429 from api$/);
  });
});
