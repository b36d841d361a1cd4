/**
 * The operators' dashboard in a real browser (Debian's Chromium via playwright-core) against a real
 * server: the live runs list, a deadlocked run's cycle, a blocked call's reason, reviews, cancel, the
 * recording, a 500-call run, auth, keyboard use and a narrow window. Screenshots go to
 * test-results/screenshots/ (and, with UPDATE_SCREENSHOTS=1, docs/screenshots/dashboard.png for the README).
 *
 * Without Chromium this suite is skipped locally; with CI=true it fails (see helpers/browser.ts).
 */
import { mkdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
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
  - name: sleep
    input: { type: object, properties: { ms: { type: integer, minimum: 0 } }, required: [ms] }
    reads: []
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: sleep }
  - name: echo
    input: { type: object }
    reads: []
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: echo }
  - name: fail
    input: { type: object, properties: { message: { type: string }, retryable: { type: boolean } } }
    reads: []
    writes: []
    risk: read
    idempotent: true
    retry: { attempts: 2, backoffMs: 60, maxBackoffMs: 100 }
    executor: { kind: builtin, name: fail }
  - name: run_tests
    input: { type: object, properties: { ms: { type: integer, minimum: 0 } }, required: [ms] }
    reads: ["file:*"]
    writes: []
    risk: read
    idempotent: true
    concurrency: 2
    executor: { kind: builtin, name: sleep }
  - name: read_file
    input: { type: object, properties: { path: { type: string } }, required: [path] }
    reads: ["file:{path}"]
    writes: []
    risk: read
    idempotent: true
    executor: { kind: builtin, name: echo }
  - name: write_file
    input: { type: object, properties: { path: { type: string }, content: { type: string } }, required: [path, content] }
    reads: []
    writes: ["file:{path}"]
    risk: write
    executor: { kind: builtin, name: echo }
  - name: deploy
    input: { type: object, properties: { name: { type: string }, image: { type: string } }, required: [name] }
    reads: []
    writes: ["service:{name}"]
    scope: global
    risk: dangerous
    after: [run_tests]
    executor: { kind: builtin, name: echo }
policy:
  rules:
    - match: { risk: dangerous }
      review: true
limits:
  global: 32
  perRun: 16
  maxCallsPerRun: 1000
defaults:
  failure: partial
`;

const OPERATOR_KEY = 'op-key-for-the-dashboard-test';
const AUTH_YAML = `${YAML}
auth:
  keys:
    - { key: ${OPERATOR_KEY}, tenant: ops, role: operator }
    - { key: agent-key-acme, tenant: acme, role: agent }
`;

const suite = HAS_CHROMIUM || IS_CI ? describe : describe.skip;

suite('dashboard (browser)', () => {
  let browser: Browser;
  let server: DashboardServer;
  let context: BrowserContext;
  let page: Page;
  let errors: string[];
  const started = Date.now();

  beforeAll(async () => {
    if (!HAS_CHROMIUM) throw new Error(MISSING_BROWSER);
    [browser, server] = await Promise.all([launchBrowser(), startDashboard(YAML)]);
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    console.log(`dashboard browser suite: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  });

  async function open(hash = '', viewport = { width: 1280, height: 800 }): Promise<Page> {
    context = await browser.newContext({ viewport, acceptDownloads: true });
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

  it('serves the page and its assets with a strict CSP', async () => {
    const res = await fetch(`${server.url}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/html/);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    for (const asset of [
      'app.js',
      'api.js',
      'graph.js',
      'timeline.js',
      'model.js',
      'util.js',
      'style.css',
      'favicon.svg',
      'pages/run.js',
      'panels/graph-panel.js',
    ]) {
      const r = await fetch(`${server.url}/assets/${asset}`);
      expect(r.status, asset).toBe(200);
    }
  });

  it('updates the runs list live, without a reload', async () => {
    await open();
    await page.locator('.live[data-state="open"]').waitFor();
    await page.locator('.counts .chip').first().waitFor();
    const run = await server.submit({ calls: [{ id: 's1', tool: 'sleep', args: { ms: 400 } }], tags: { team: 'live' } });
    const row = page.locator(`tr[data-id="${run.id}"]`);
    await row.waitFor({ timeout: 5000 });
    await expect.poll(() => row.getAttribute('data-status'), { timeout: 5000 }).toBe('succeeded');
    await expect.poll(() => page.locator('.chip[data-status="succeeded"] b').textContent()).not.toBe('0');
    // Filters: a tag that matches nothing, then the run's tag.
    await page.getByLabel('Tag').fill('team:nobody');
    await page.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => page.locator('tbody tr').count()).toBe(0);
    await page.getByLabel('Tag').fill('team:live');
    await page.getByRole('button', { name: 'Apply' }).click();
    await row.waitFor();
    expect(page.url()).toContain('tag=team%3Alive');
    // A new run under the filter also appears live.
    const second = await server.submit({ calls: [{ id: 'e1', tool: 'echo', args: {} }], tags: { team: 'live' } });
    await page.locator(`tr[data-id="${second.id}"]`).waitFor({ timeout: 5000 });
    await screenshot(page, 'list-live');
  });

  it('shows a deadlocked run with its cycle highlighted', async () => {
    const run = await server.submit({
      calls: [
        { id: 'a', tool: 'echo', args: { x: '${b.output}' } },
        { id: 'b', tool: 'echo', args: { x: '${a.output}' } },
        { id: 'c', tool: 'echo', args: { x: '${a.output.x}' } },
        { id: 'd', tool: 'echo', args: { ok: true } },
      ],
      waitMs: 5000,
    });
    expect(run.status).toBe('deadlocked');
    await open(`#/runs/${run.id}`);
    const alert = page.locator('.cycle-alert');
    await alert.waitFor();
    expect(await alert.locator('.cycle-path').innerText()).toMatch(/a\s*→\s*b\s*→\s*a/);
    expect(await page.locator('.run-status').innerText()).toContain('deadlocked');
    for (const id of ['a', 'b']) {
      const node = page.locator(`.node[data-id="${id}"]`);
      expect(await node.getAttribute('class')).toContain('cycle');
      expect(await node.locator('.stt').textContent()).toBe('blocked');
    }
    expect(await page.locator('.node[data-id="d"] .stt').textContent()).toBe('succeeded');
    expect(await page.locator('.node[data-id="c"]').getAttribute('class')).not.toContain('cycle');
    expect(await page.locator('.edge.cycle').count()).toBe(2);
    expect(await page.locator('.edge.cycle title').allTextContents()).toEqual(
      expect.arrayContaining([expect.stringContaining('a uses ${b.output}'), expect.stringContaining('b uses ${a.output}')]),
    );
    // c is blocked because a is: the page says so and names a.
    const c = page.locator('.stuck li[data-call="c"]');
    expect(await c.innerText()).toContain('dependency_blocked');
    expect(await c.locator('.waits').innerText()).toContain('a');
    await screenshot(page, 'deadlocked-run');
    // The list's "needs attention" view shows it, with the cycle as the reason.
    await page.goto(`${server.url}/#/?attention=1`);
    const row = page.locator(`tr[data-id="${run.id}"]`);
    await row.waitFor();
    expect(await row.locator('.c-why').innerText()).toContain('cycle');
    await screenshot(page, 'needs-attention');
  });

  it('says why a call is blocked and on which call it waits; edges show their reason on focus', async () => {
    const run = await server.submit({
      calls: [
        { id: 'fetch', tool: 'fail', args: { message: 'upstream said 503', retryable: true } },
        { id: 'parse', tool: 'echo', args: { body: '${fetch.output}' } },
        { id: 'store', tool: 'echo', args: { rows: '${parse.output}' } },
        { id: 'ok', tool: 'echo', args: {} },
      ],
      waitMs: 5000,
    });
    expect(run.status).toBe('partial');
    await open(`#/runs/${run.id}`);
    const parse = page.locator('.stuck li[data-call="parse"]');
    await parse.waitFor();
    expect(await parse.innerText()).toMatch(/dependency_failed: fetch failed/);
    expect(await parse.locator('.waits').innerText()).toContain('fetch');
    expect(await page.locator('.node[data-id="parse"] .note').textContent()).toContain('fetch');
    // Keyboard: focus the node, Enter opens its details, which say why and link the call it waits on.
    await page.locator('.node[data-id="parse"]').focus();
    await page.keyboard.press('Enter');
    const details = page.locator('.details');
    await details.waitFor();
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe('dt-h');
    expect(await details.locator('.why-box').innerText()).toMatch(/dependency_failed[\s\S]*Waits on fetch/);
    expect(page.url()).toContain('call=parse');
    // The failed call: its two attempts (one retry) and its error.
    await details.locator('.why-box [data-open="fetch"]').click();
    await expect.poll(() => details.locator('h2').innerText()).toContain('fetch');
    expect(await details.locator('table.attempts tbody tr').count()).toBe(2);
    expect(await details.innerText()).toContain('upstream said 503');
    // Escape closes the details and puts the focus back on the node.
    await details.locator('h2').focus();
    await page.keyboard.press('Escape');
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute('data-id'))).toBe('fetch');
    // Arrow keys move between nodes; an edge is focusable and shows its reason.
    const edge = page.locator('.edge[data-from="fetch"][data-to="parse"]');
    expect(await edge.getAttribute('tabindex')).toBe('0');
    await edge.focus();
    const tip = page.locator('.graph .tooltip');
    await tip.waitFor();
    expect(await tip.innerText()).toContain('parse uses ${fetch.output}');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute('data-id'))).toBe('parse');
    // Hovering the edge shows the reason too (the nodes' layer lets the pointer through).
    const mid = await edge.locator('.line').evaluate((path: SVGPathElement) => {
      const p = path.getPointAtLength(path.getTotalLength() / 2);
      const m = path.getScreenCTM() as DOMMatrix;
      return { x: p.x * m.a + p.y * m.c + m.e, y: p.x * m.b + p.y * m.d + m.f };
    });
    await page.mouse.move(mid.x, mid.y);
    await expect.poll(() => tip.isVisible()).toBe(true);
    expect(await tip.innerText()).toContain('data edge fetch → parse');
    // The timeline shows the retry (failed attempt, backoff, then the last attempt).
    expect(await page.locator('.timeline .bar.o-retry').count()).toBe(1);
    expect(await page.locator('.timeline .backoff').count()).toBe(1);
    await screenshot(page, 'blocked-call');
  });

  it('approves a review in the page, and the call runs', async () => {
    const run = await server.submit({
      calls: [
        { id: 'tests', tool: 'run_tests', args: { ms: 50 } },
        { id: 'ship', tool: 'deploy', args: { name: 'web', image: 'web:1' } },
      ],
      waitMs: 3000,
    });
    expect(run.status).toBe('running');
    await open(`#/runs/${run.id}`);
    const form = page.locator('form.review[data-call="ship"]');
    await form.waitFor();
    expect(await page.locator('.node[data-id="ship"] .stt').textContent()).toBe('awaiting review');
    // Edited args must be JSON; the error is said and nothing is sent.
    await form.locator('textarea').fill('{ "name": ');
    await form.getByRole('button', { name: 'Approve with these args' }).click();
    expect(await form.locator('.msg').innerText()).toContain('not valid JSON');
    // Edited args the schema rejects: the server's 400 is shown, the call keeps waiting.
    await form.locator('textarea').fill('{ "image": "web:2" }');
    await form.getByRole('button', { name: 'Approve with these args' }).click();
    await expect.poll(() => form.locator('.msg').innerText()).toMatch(/name/);
    await form.locator('textarea').fill('{ "name": "web", "image": "web:2" }');
    await form.getByRole('button', { name: 'Approve with these args' }).click();
    await expect.poll(() => page.locator('.node[data-id="ship"] .stt').textContent(), { timeout: 5000 }).toBe('succeeded');
    await expect.poll(() => page.locator('.run-status').innerText()).toContain('succeeded');
    expect(await page.locator('form.review').count()).toBe(0);
    await page.locator('.node[data-id="ship"]').click();
    expect(await page.locator('.details').innerText()).toContain('web:2');
    const view = (await server.api('GET', `/v1/runs/${run.id}`)).body;
    expect(view.calls[1].output).toEqual({ name: 'web', image: 'web:2' });
  });

  it('approves as is, and rejects', async () => {
    const run = await server.submit({
      calls: [
        { id: 'one', tool: 'deploy', args: { name: 'api' } },
        { id: 'two', tool: 'deploy', args: { name: 'db' } },
      ],
    });
    await open(`#/runs/${run.id}`);
    await page.locator('form.review[data-call="one"]').getByRole('button', { name: 'Approve', exact: true }).click();
    const two = page.locator('form.review[data-call="two"]');
    await two.getByLabel('Comment (optional)').fill('not today');
    await two.getByRole('button', { name: 'Reject' }).click();
    await expect.poll(() => page.locator('.run-status').innerText(), { timeout: 5000 }).toContain('partial');
    expect(await page.locator('.node[data-id="one"] .stt').textContent()).toBe('succeeded');
    expect(await page.locator('.node[data-id="two"] .stt').textContent()).toBe('failed');
    expect(await page.locator('.stuck li[data-call="two"]').innerText()).toContain('rejected in review: not today');
  });

  it('cancels a run and downloads its recording', async () => {
    const run = await server.submit({
      calls: [
        { id: 'long', tool: 'sleep', args: { ms: 60000 } },
        { id: 'after', tool: 'echo', args: { x: '${long.output}' } },
      ],
    });
    await open(`#/runs/${run.id}`);
    await expect.poll(() => page.locator('.node[data-id="long"] .stt').textContent()).toBe('running');
    await page.getByRole('button', { name: 'Cancel run…' }).click();
    await page.getByRole('button', { name: 'Yes, cancel the run' }).click();
    await expect.poll(() => page.locator('.run-status').innerText(), { timeout: 5000 }).toContain('cancelled');
    expect(await page.locator('.node[data-id="long"] .stt').textContent()).toBe('cancelled');
    expect(await page.locator('.node[data-id="after"] .stt').textContent()).toBe('cancelled');
    expect(await page.getByRole('button', { name: 'Cancel run…' }).isDisabled()).toBe(true);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download recording' }).click()]);
    expect(download.suggestedFilename()).toBe(`${run.id}.recording.json`);
    const file = await download.path();
    const rec = JSON.parse(readFileSync(file, 'utf8'));
    expect(rec.format).toBe('toolgraph.recording/v1');
    expect(rec.result.status).toBe('cancelled');
  });

  it('shows limit waits in the timeline, and the README screenshot', async () => {
    const run = await server.submit({
      calls: [
        { id: 'lint', tool: 'run_tests', args: { ms: 500 } },
        { id: 'unit', tool: 'run_tests', args: { ms: 700 } },
        { id: 'e2e', tool: 'run_tests', args: { ms: 600 } },
        { id: 'read_cfg', tool: 'read_file', args: { path: '/repo/config.yaml' } },
        { id: 'patch_cfg', tool: 'write_file', args: { path: '/repo/config.yaml', content: '${read_cfg.output.path}' } },
        { id: 'fetch_spec', tool: 'fail', args: { message: 'registry returned 502' } },
        { id: 'render_spec', tool: 'echo', args: { spec: '${fetch_spec.output}' } },
        { id: 'publish_spec', tool: 'echo', args: { doc: '${render_spec.output}' } },
        { id: 'build', tool: 'sleep', args: { ms: 300 } },
        { id: 'deploy_web', tool: 'deploy', args: { name: 'web', image: 'web:${build.output.ms}' } },
        { id: 'notify', tool: 'echo', args: { text: 'deployed ${deploy_web.output.image}' } },
      ],
      tags: { team: 'platform', env: 'prod' },
    });
    await open(`#/runs/${run.id}`);
    await page.locator('form.review[data-call="deploy_web"]').waitFor({ timeout: 5000 });
    // run_tests has concurrency 2: one of the three waited between ready and started.
    await expect.poll(() => page.locator('.timeline .bar.wait').count(), { timeout: 5000 }).toBeGreaterThan(0);
    expect(await page.locator('.tl-summary').innerText()).toMatch(/waited for a limit/);
    expect(await page.locator('.edge.k-policy').count()).toBe(3);
    expect(await page.locator('.edge.k-conflict').count()).toBeGreaterThan(0);
    await page.locator('.node[data-id="render_spec"]').click();
    await page.locator('.details .why-box').waitFor();
    await page.evaluate(() => window.scrollTo(0, 0));
    await screenshot(page, 'run-view-1280x800');
    await screenshot(page, 'run-view-full', { fullPage: true });
    // For the README: the run view at 1280×800, rewritten only when asked (UPDATE_SCREENSHOTS=1), so
    // that running the tests leaves the work tree as it was.
    const readmeShot = process.env.UPDATE_SCREENSHOTS ? 'docs/screenshots/dashboard.png' : 'test-results/screenshots/readme-dashboard.png';
    mkdirSync(path.dirname(readmeShot), { recursive: true });
    await page.screenshot({ path: readmeShot });
    expect(statSync(readmeShot).size).toBeLessThan(300 * 1024);
    await page.locator('form.review[data-call="deploy_web"]').getByRole('button', { name: 'Approve', exact: true }).click();
    await expect.poll(() => page.locator('.run-status').innerText(), { timeout: 5000 }).toContain('partial');
  });

  it('renders a run of 500 calls quickly, and follows it live', async () => {
    // 10 generations of 50: each call uses the output of the one before it in its lane.
    const calls = [];
    for (let g = 0; g < 10; g++) {
      for (let i = 0; i < 50; i++) {
        calls.push({ id: `g${g}_${i}`, tool: 'sleep', args: g === 0 ? { ms: 5 } : { ms: 5, after: `\${g${g - 1}_${i}.output.ms}` } });
      }
    }
    // Live: open the page while the run goes (16 at a time).
    const live = await server.submit({ calls: calls.map((c) => ({ ...c, args: { ...c.args, ms: 20 } })) });
    await open(`#/runs/${live.id}`);
    const t0 = Date.now();
    await page.locator('.run-page[data-rendered="500"]').waitFor({ timeout: 10_000 });
    const firstRender = Date.now() - t0;
    await page.locator('.run-page[data-status="succeeded"]').waitFor({ timeout: 20_000 });
    expect(await page.locator('.node').count()).toBe(500);
    expect(await page.locator('.node.s-succeeded').count()).toBe(500);
    await screenshot(page, 'run-500-live');

    // Ended: from navigation to the whole graph and timeline drawn.
    const ended = await server.submit({ calls, waitMs: 20_000 });
    expect(ended.status).toBe('succeeded');
    // Count only the renders of this page load (a hash change keeps the document and its measures).
    await page.evaluate(() => performance.clearMeasures('toolgraph:render'));
    const t1 = Date.now();
    await page.goto(`${server.url}/#/runs/${ended.id}`);
    await page.locator('.run-page[data-status="succeeded"][data-rendered="500"]').waitFor({ timeout: 10_000 });
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const cold = Date.now() - t1;
    // The timeline is drawn once it scrolls into view.
    await page.locator('.timeline-section').scrollIntoViewIfNeeded();
    await page.locator('.timeline .trow').nth(499).waitFor();
    // The page draws at most once per animation frame, not once per event: ~1500 events, a few
    // renders (a loaded machine spreads the loading over more frames, hence the margin).
    const renders = await page.evaluate(() => performance.getEntriesByName('toolgraph:render').map((e) => Math.round(e.duration)));
    console.log(
      `500 calls: a live run first drawn in ${firstRender} ms; an ended run loaded and drawn in ${cold} ms, in ${renders.length} renders (${renders.join(', ')} ms of script)`,
    );
    expect(cold).toBeLessThan(8000);
    expect(renders.length).toBeLessThan(40);
    expect(await page.locator('.edge.k-data').count()).toBe(450);
    await screenshot(page, 'run-500');
  });

  it('is usable from the keyboard on the list, and fits a narrow window', async () => {
    const run = await server.submit({
      calls: [
        { id: 'x', tool: 'fail', args: { message: 'nope' } },
        { id: 'y', tool: 'echo', args: { v: '${x.output}' } },
      ],
      waitMs: 3000,
    });
    await open('', { width: 390, height: 844 });
    await page.locator(`tr[data-id="${run.id}"]`).waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await screenshot(page, 'list-narrow');
    // Keyboard: the run's link opens the run.
    await page.locator(`tr[data-id="${run.id}"] a`).focus();
    await page.keyboard.press('Enter');
    await page.locator('.run-page[data-status="failed"]').waitFor();
    expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(0);
    await page.locator('.node[data-id="y"]').focus();
    await page.keyboard.press(' ');
    await page.locator('.details .why-box').waitFor();
    expect(await page.locator('.details').isVisible()).toBe(true);
    await screenshot(page, 'run-narrow', { fullPage: true });
  });

  it('asks for an operator key when auth is on, and keeps it for the session', async () => {
    const secure = await startDashboard(AUTH_YAML);
    try {
      const run = await secure.submit({ calls: [{ id: 'c1', tool: 'echo', args: {} }], waitMs: 2000 }, 'agent-key-acme');
      context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      page = await context.newPage();
      errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`${secure.url}/`);
      const dialog = page.locator('dialog#login');
      await dialog.waitFor();
      await page.getByRole('textbox', { name: 'Key' }).fill('wrong-key');
      await page.getByRole('button', { name: 'Use this key' }).click();
      await expect.poll(() => dialog.locator('.login-error').innerText()).toContain('unknown API key');
      await screenshot(page, 'login');
      await page.getByRole('textbox', { name: 'Key' }).fill(OPERATOR_KEY);
      await page.getByRole('button', { name: 'Use this key' }).click();
      await page.locator(`tr[data-id="${run.id}"]`).waitFor();
      await page.locator('.live[data-state="open"]').waitFor();
      expect(await page.evaluate(() => sessionStorage.getItem('toolgraph.key'))).toBe(OPERATOR_KEY);
      // The live stream carries the key too (fetch streaming, not EventSource).
      const next = await secure.submit({ calls: [{ id: 'c2', tool: 'echo', args: {} }] }, 'agent-key-acme');
      await page.locator(`tr[data-id="${next.id}"]`).waitFor({ timeout: 5000 });
      // A reload keeps the key for the session: no prompt.
      await page.reload();
      await page.locator(`tr[data-id="${run.id}"]`).waitFor();
      expect(await dialog.isVisible()).toBe(false);
      await page.getByRole('button', { name: 'Forget key' }).click();
      await dialog.waitFor();
    } finally {
      await context.close();
      await secure.close();
    }
  });
});

describe('GET /v1/stream', () => {
  let server: DashboardServer;
  beforeAll(async () => {
    server = await startDashboard(`${YAML}
auth:
  keys:
    - { key: op, tenant: ops, role: operator }
    - { key: a1, tenant: acme, role: agent }
    - { key: a2, tenant: globex, role: agent }
`);
  });
  afterAll(async () => server?.close());

  async function follow(token: string, query = '') {
    const ac = new AbortController();
    const res = await fetch(`${server.url}/v1/stream${query}`, { headers: { authorization: `Bearer ${token}` }, signal: ac.signal });
    const events: { event: string; data: any }[] = [];
    const done = (async () => {
      if (!res.body) return;
      const decoder = new TextDecoder();
      let buf = '';
      try {
        const reader = res.body.getReader();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += decoder.decode(value, { stream: true });
          let i: number;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const event = /^event: (.*)$/m.exec(block)?.[1];
            const data = /^data: (.*)$/m.exec(block)?.[1];
            if (event && data) events.push({ event, data: JSON.parse(data) });
          }
        }
      } catch {
        /* aborted */
      }
    })();
    return {
      res,
      events,
      close: async () => {
        ac.abort();
        await done;
      },
    };
  }

  it('sends run changes to those who may see them, coalesced per run, with counts', async () => {
    const op = await follow('op');
    const acme = await follow('a1');
    const globex = await follow('a2');
    expect(op.res.status).toBe(200);
    expect(op.res.headers.get('content-type')).toMatch(/text\/event-stream/);
    await expect.poll(() => op.events.length).toBeGreaterThan(0);
    expect(op.events[0]).toMatchObject({ event: 'counts' });
    const calls = Array.from({ length: 40 }, (_, i) => ({ id: `c${i}`, tool: 'sleep', args: { ms: 5 } }));
    const run = await server.submit({ calls, tags: { k: 'v' }, waitMs: 5000 }, 'a1');
    expect(run.status).toBe('succeeded');
    const last = () => op.events.filter((e) => e.event === 'run' && e.data.id === run.id).at(-1)?.data;
    await expect.poll(() => last()?.status).toBe('succeeded');
    expect(last()).toMatchObject({
      id: run.id,
      tenant: 'acme',
      tags: { k: 'v' },
      callCount: 40,
      callCounts: { succeeded: 40, running: 0 },
    });
    // ~120 events, far fewer summaries.
    const n = op.events.filter((e) => e.event === 'run' && e.data.id === run.id).length;
    expect(n).toBeLessThan(15);
    await expect.poll(() => acme.events.some((e) => e.event === 'run' && e.data.id === run.id && e.data.status === 'succeeded')).toBe(true);
    await expect.poll(() => op.events.filter((e) => e.event === 'counts').at(-1)?.data.counts.succeeded).toBe(1);
    expect(globex.events.some((e) => e.event === 'run')).toBe(false);
    expect(Object.values(globex.events[0]?.data.counts ?? { x: 1 }).every((n) => n === 0)).toBe(true);
    await Promise.all([op.close(), acme.close(), globex.close()]);
  });

  it('filters by tenant, and refuses an agent another tenant', async () => {
    const forbidden = await fetch(`${server.url}/v1/stream?tenant=globex`, { headers: { authorization: 'Bearer a1' } });
    expect(forbidden.status).toBe(403);
    expect((await forbidden.json()).error.code).toBe('forbidden');
    const bad = await fetch(`${server.url}/v1/stream?tenant=no%20spaces`, { headers: { authorization: 'Bearer op' } });
    expect(bad.status).toBe(400);
    expect((await fetch(`${server.url}/v1/stream`)).status).toBe(401);
    const op = await follow('op', '?tenant=globex');
    await expect.poll(() => op.events.length).toBeGreaterThan(0);
    await server.submit({ calls: [{ id: 'x', tool: 'echo' }], waitMs: 2000 }, 'a1');
    const g = await server.submit({ calls: [{ id: 'y', tool: 'echo' }], waitMs: 2000 }, 'a2');
    await expect.poll(() => op.events.some((e) => e.event === 'run' && e.data.id === g.id)).toBe(true);
    expect(op.events.filter((e) => e.event === 'run').every((e) => e.data.tenant === 'globex')).toBe(true);
    await op.close();
  });
});
