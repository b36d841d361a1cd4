/**
 * Browser tests of the dashboard: Debian's Chromium driven by playwright-core, against a real server
 * (in-process `buildServer` with the dashboard plugin, a SQLite store in a fresh temp dir, listening on
 * 127.0.0.1:0).
 *
 * Without Chromium the browser suite is skipped locally, but with `CI=true` it fails with a clear
 * message: a CI run must never pass by skipping its browser tests.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { chromium, type Browser, type Page } from 'playwright-core';
import { buildServer } from '../../src/api/server.js';
import { Service } from '../../src/api/service.js';
import { parseConfig } from '../../src/config/load.js';
import { dashboardRoutes } from '../../src/dashboard/routes.js';
import { openSqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/types.js';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const IS_CI = /^(1|true|yes)$/i.test(process.env.CI ?? '');
export const HAS_CHROMIUM = existsSync(CHROMIUM_PATH);
export const SCREENSHOTS = path.resolve('test-results/screenshots');

export const MISSING_BROWSER =
  `the dashboard browser tests need Chromium at ${CHROMIUM_PATH} (set CHROMIUM_PATH, or apt-get install -y chromium); ` +
  'CI=true is set, so they fail instead of being skipped';

export async function launchBrowser(): Promise<Browser> {
  if (!HAS_CHROMIUM) throw new Error(MISSING_BROWSER);
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

export interface DashboardServer {
  url: string;
  service: Service;
  store: Store;
  app: FastifyInstance;
  /** POST/GET against the API (optionally as `token`); the parsed JSON body and the status. */
  api<T = any>(method: string, p: string, body?: unknown, token?: string): Promise<{ status: number; body: T }>;
  /** Submits a run and returns its view (with `waitMs`, once it ended or that time passed). */
  submit(body: Record<string, unknown>, token?: string): Promise<any>;
  close(): Promise<void>;
}

export async function startDashboard(yaml: string): Promise<DashboardServer> {
  const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-dash-'));
  const config = parseConfig(yaml, 'dashboard-test.yaml', { env: {}, baseDir: dir });
  const store = openSqliteStore(path.join(dir, 'toolgraph.db'));
  const service = new Service({ config, store });
  await service.recover();
  const app = buildServer({ service, plugins: [dashboardRoutes], heartbeatMs: 2000 });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const api = async (method: string, p: string, body?: unknown, token?: string) => {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (token) headers.authorization = `Bearer ${token}`;
    const res = await fetch(url + p, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    const text = await res.text();
    let parsed: any;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
    return { status: res.status, body: parsed };
  };
  return {
    url,
    service,
    store,
    app,
    api,
    async submit(body, token) {
      const res = await api('POST', '/v1/runs', body, token);
      if (res.status !== 201 && res.status !== 200) throw new Error(`POST /v1/runs: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body;
    },
    async close() {
      await app.close();
      await service.engine.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Collects the page's console errors and uncaught exceptions, to assert there were none. */
export function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  // API errors (4xx) are part of the flows under test and shown in the page; Chromium logs each
  // failed fetch on the console, so those are left out, but a failing page asset is an error.
  page.on('console', (m) => {
    if (m.type() === 'error' && !/^Failed to load resource: the server responded with a status of 4\d\d/.test(m.text()))
      errors.push(`console: ${m.text()}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400 && !new URL(r.url()).pathname.startsWith('/v1/')) errors.push(`response: ${r.status()} ${r.url()}`);
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  return errors;
}

export async function screenshot(page: Page, name: string, opts: { fullPage?: boolean } = {}): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const file = path.join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: opts.fullPage ?? false });
  return file;
}
