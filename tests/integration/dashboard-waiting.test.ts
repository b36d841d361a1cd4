/**
 * Why a call waits, in the dashboard (issue #21), in a real browser against a real server: a waiting
 * call names the lock and who holds it, with links; the timeline names the limit of each wait; the
 * Limits page shows contention live; "Needs attention" lists a run whose call has waited too long.
 * Screenshots go to test-results/screenshots/ (waiting-call, limits-page, needs-attention-waiting).
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
  screenshot,
  startDashboard,
  watchErrors,
  type DashboardServer,
} from '../helpers/browser.js';

const YAML = `
tools:
  - name: run_tests
    input: { type: object, properties: { ms: { type: integer, minimum: 0 } }, required: [ms] }
    reads: ["file:*"]
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: sleep }
  - name: write_file
    input: { type: object, properties: { path: { type: string }, ms: { type: integer } }, required: [path] }
    reads: []
    writes: ["file:{path}"]
    risk: write
    executor: { kind: builtin, name: sleep }
  - name: migrate
    input: { type: object, properties: { ms: { type: integer, minimum: 0 } }, required: [ms] }
    reads: []
    writes: []
    risk: write
    idempotent: true
    concurrency: 1
    executor: { kind: builtin, name: sleep }
limits:
  global: 32
  maxCallsPerRun: 1000
`;

const suite = HAS_CHROMIUM || IS_CI ? describe : describe.skip;

suite('dashboard: why a call waits (browser)', () => {
  let browser: Browser;
  let server: DashboardServer;
  let context: BrowserContext;
  let page: Page;
  let errors: string[];

  beforeAll(async () => {
    if (!HAS_CHROMIUM) throw new Error(MISSING_BROWSER);
    [browser, server] = await Promise.all([launchBrowser(), startDashboard(YAML)]);
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  async function open(hash = ''): Promise<Page> {
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await context.newPage();
    page.setDefaultTimeout(8000);
    errors = watchErrors(page);
    await page.goto(`${server.url}/${hash}`);
    return page;
  }

  afterEach(async () => {
    await context?.close();
    // Whatever a failed test left running holds no lock for the next one.
    for (const r of (await server.api('GET', '/v1/runs?status=running')).body.items) await server.api('POST', `/v1/runs/${r.id}/cancel`);
    expect(errors ?? []).toEqual([]);
  });

  const cancel = async (id: string) => expect((await server.api('POST', `/v1/runs/${id}/cancel`)).status).toBe(202);
  const ended = async (id: string) =>
    expect.poll(async () => (await server.api('GET', `/v1/runs/${id}`)).body.endedAt, { timeout: 8000 }).not.toBeNull();

  it('a waiting call says what it waits for and who holds it, with links; the timeline names the limit', async () => {
    const a = await server.submit({ calls: [{ id: 'tests', tool: 'run_tests', args: { ms: 60_000 } }] });
    const b = await server.submit({ calls: [{ id: 'write', tool: 'write_file', args: { path: '/repo/a.ts', ms: 1 } }] });
    await open(`#/runs/${b.id}?call=write`);
    const why = page.locator('.details .why-box .waiting-for');
    await expect
      .poll(() => why.innerText())
      .toMatch(new RegExp(`^Waiting \\d.* for lock file:\\* \\(shared by tenant default\\) held by run ${a.id} / call tests for \\d`));
    expect(await page.locator(`.node[data-id="write"]`).textContent()).toContain('waiting for lock file:*');
    const link = why.locator('a.holder');
    expect(await link.getAttribute('href')).toBe(`#/runs/${a.id}?call=tests`);
    // The side panel of calls that are not done says it too.
    expect(await page.locator('.stuck .waiting-for').innerText()).toContain(
      `waiting for lock file:* (shared by tenant default) held by run ${a.id} / call tests`,
    );
    // The time held goes on (the page follows the server's clock).
    const first = await why.innerText();
    await expect.poll(() => why.innerText(), { timeout: 4000 }).not.toBe(first);
    await screenshot(page, 'waiting-call');

    // The link opens the holder, in its run.
    await link.click();
    await expect.poll(() => page.locator('h1').innerText()).toContain(a.id);
    await page.locator('.details h2').filter({ hasText: 'tests' }).waitFor();
    expect(page.url()).toContain(`#/runs/${a.id}?call=tests`);

    // The holder ends: the call starts, and the wait is no more; the timeline names what it waited for.
    await cancel(a.id);
    await ended(b.id);
    await page.goto(`${server.url}/#/runs/${b.id}?call=write`);
    await expect.poll(() => page.locator('.run-status').innerText()).toContain('succeeded');
    expect(await page.locator('.details .why-box').count()).toBe(0);
    const bar = page.locator('.timeline .bar.wait title');
    await expect.poll(() => bar.count()).toBe(1);
    expect(await bar.textContent()).toMatch(
      new RegExp(
        `write attempt 1: ready, waited .* for lock file:\\* \\(shared by tenant default\\) held by run ${a.id} / call tests before it started`,
      ),
    );
    expect(await page.locator('.details table.attempts').innerText()).toContain('lock file:*');
  });

  it('the Limits page shows contention live: what is full, what waits behind it, for how long', async () => {
    const a = await server.submit({ calls: [{ id: 'tests', tool: 'run_tests', args: { ms: 60_000 } }] });
    const b = await server.submit({ calls: [{ id: 'write', tool: 'write_file', args: { path: '/repo/b.ts', ms: 1 } }] });
    const m = await server.submit({
      calls: [
        { id: 'm1', tool: 'migrate', args: { ms: 60_000 } },
        { id: 'm2', tool: 'migrate', args: { ms: 1 } },
        { id: 'm3', tool: 'migrate', args: { ms: 1 } },
      ],
    });
    await open('#/limits');
    expect(await page.locator('nav [data-nav="limits"]').getAttribute('aria-current')).toBe('page');
    const lock = page.locator('table.limits tr[data-kind="lock"][data-key="file:*"]');
    const tool = page.locator('table.limits tr[data-kind="tool"][data-key="migrate"]');
    await expect.poll(() => tool.locator('.c-waiting').innerText()).toBe('2');
    expect(await tool.locator('th').innerText()).toBe('tool limit migrate');
    expect(await tool.locator('.c-use').innerText()).toContain('1 of 1');
    expect(await tool.locator('.c-holders').innerText()).toMatch(new RegExp(`run ${m.id} / call m1 for \\d`));
    expect(await lock.locator('.c-waiting').innerText()).toBe('1');
    expect(await lock.locator('.c-holders a.holder').getAttribute('href')).toBe(`#/runs/${a.id}?call=tests`);
    // The most waiters first; the longest wait grows while they wait.
    expect(await page.locator('table.limits tbody tr').first().getAttribute('data-key')).toBe('migrate');
    const longest = await tool.locator('.c-longest').innerText();
    await expect.poll(() => tool.locator('.c-longest').innerText(), { timeout: 4000 }).not.toBe(longest);
    expect(await page.locator('.limits-summary').innerText()).toMatch(/3 calls wait behind them/);
    await screenshot(page, 'limits-page');

    // Live, without a reload: the lock is free once its holder ends; the queue drains.
    await cancel(a.id);
    await ended(b.id);
    await expect.poll(() => lock.count()).toBe(0);
    await cancel(m.id);
    await ended(m.id);
    await expect.poll(() => page.locator('table.limits tbody tr').count()).toBe(0);
    expect(await page.locator('.limits-page .empty').isVisible()).toBe(true);
  });

  it('"Needs attention" lists a run whose call has waited longer than the threshold', async () => {
    const a = await server.submit({ calls: [{ id: 'tests', tool: 'run_tests', args: { ms: 60_000 } }] });
    const b = await server.submit({ calls: [{ id: 'write', tool: 'write_file', args: { path: '/repo/c.ts', ms: 1 } }] });
    await open('#/?attention=1&wait=1');
    expect(await page.locator('select[name="wait"]').inputValue()).toBe('1');
    const row = page.locator(`tr[data-id="${b.id}"]`);
    await expect.poll(() => row.count(), { timeout: 6000 }).toBe(1);
    expect(await row.locator('.c-why').innerText()).toMatch(/a call waiting \d.* for a limit/);
    // The holder runs, it waits for nothing: it is not listed.
    expect(await page.locator(`tr[data-id="${a.id}"]`).count()).toBe(0);
    await screenshot(page, 'needs-attention-waiting');
    await cancel(a.id);
    await ended(b.id);
  });
});
