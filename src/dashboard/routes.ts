/**
 * The operators' dashboard, served at `/` by `toolgraph serve` (static files, no build step): plain
 * HTML, CSS and ES modules from ./static and its folders, read once at start. `index.html` is served
 * at `/`, every other file at `/assets/<path>` (`/assets/app.js`, `/assets/pages/run.js`). The page talks to the same `/v1` API as any client (with the
 * operator key the browser session holds, when auth is on).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { sep } from 'node:path';
import type { FastifyInstance } from 'fastify';

const STATIC_DIR = new URL('./static/', import.meta.url);

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  mjs: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
};

/** The page may load only its own scripts and styles, and talk only to its own origin. */
const CSP =
  "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

export function dashboardRoutes(app: FastifyInstance): void {
  const files = (readdirSync(STATIC_DIR, { recursive: true }) as string[])
    .map((name) => name.split(sep).join('/'))
    .filter((name) => TYPES[name.split('.').pop() as string] !== undefined);
  for (const name of files) {
    const body = readFileSync(new URL(name, STATIC_DIR));
    const type = TYPES[name.split('.').pop() as string] as string;
    const route = name === 'index.html' ? '/' : `/assets/${name}`;
    app.get(route, async (_req, reply) =>
      reply
        .type(type)
        .header('cache-control', 'no-cache')
        .header('x-content-type-options', 'nosniff')
        .header('content-security-policy', CSP)
        .header('referrer-policy', 'no-referrer')
        .send(body),
    );
  }
}
