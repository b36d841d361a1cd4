/** The operators' dashboard, served at `/` by `toolgraph serve` (static files, no build step). */
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';

const FILES: Record<string, string> = {
  '/': 'index.html',
};

const TYPES: Record<string, string> = { html: 'text/html; charset=utf-8', js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };

export function dashboardRoutes(app: FastifyInstance): void {
  for (const [route, file] of Object.entries(FILES)) {
    const body = readFileSync(new URL(`./static/${file}`, import.meta.url), 'utf8');
    const type = TYPES[file.split('.').pop() as string] as string;
    app.get(route, async (_req, reply) => reply.type(type).header('cache-control', 'no-cache').send(body));
  }
}
