/**
 * `/docs` in a real browser (Debian's Chromium): Swagger UI renders the API from the server's own files
 * with every other host blocked (it works offline, no CDN), lists the routes, and "Try it out" on
 * `GET /healthz` sends the request to this server and shows its answer.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

const YAML = 'tools: [{ name: echo, reads: [], writes: [], executor: { kind: builtin } }]\n';
const run = HAS_CHROMIUM || IS_CI ? describe : describe.skip;

run('/docs in a browser', () => {
  let browser: Browser;
  let server: DashboardServer;
  let page: Page;
  let errors: string[] = [];
  const offsite: string[] = [];

  beforeAll(async () => {
    if (!HAS_CHROMIUM) throw new Error(MISSING_BROWSER);
    [browser, server] = await Promise.all([launchBrowser(), startDashboard(YAML)]);
    const context = await browser.newContext();
    // Offline: anything not served by this server is refused (and recorded).
    await context.route('**/*', (route) => {
      const url = new URL(route.request().url());
      if (url.origin === new URL(server.url).origin || url.protocol === 'data:') return route.continue();
      offsite.push(url.href);
      return route.abort();
    });
    page = await context.newPage();
    errors = watchErrors(page);
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('renders the operations from local files only', async () => {
    await page.goto(`${server.url}/docs`);
    await page.locator('.opblock-summary-path', { hasText: '/v1/runs' }).first().waitFor({ timeout: 20_000 });
    const paths = await page.locator('.opblock-summary-path').allTextContents();
    for (const p of ['/v1/runs', '/v1/plan', '/v1/reviews', '/healthz']) expect(paths.map((t) => t.replace(/\u200b/g, ''))).toContain(p);
    expect(await page.title()).toBe('toolgraph API');
    expect(offsite).toEqual([]);
    expect(errors).toEqual([]);
    await screenshot(page, 'api-docs', { fullPage: false });
  }, 40_000);

  it('"Try it out" sends GET /healthz to this server and shows the answer', async () => {
    const op = page.locator('.opblock', { has: page.locator('.opblock-summary-path', { hasText: /^\/healthz$/ }) });
    await op.locator('.opblock-summary').click();
    // tryItOutEnabled: the operation opens ready to execute.
    const [res] = await Promise.all([
      page.waitForResponse((r) => new URL(r.url()).pathname === '/healthz', { timeout: 20_000 }),
      op.locator('button.execute').click(),
    ]);
    expect(res.url().startsWith(server.url)).toBe(true);
    expect(res.status()).toBe(200);
    await op.locator('.live-responses-table .response-col_status', { hasText: '200' }).first().waitFor({ timeout: 10_000 });
    expect(await op.locator('.live-responses-table').textContent()).toContain('"status": "ok"');
    expect(offsite).toEqual([]);
  }, 40_000);
});
