/**
 * The API's description (DESIGN §7): `openapi.yaml` at the repo root is exactly what
 * `GET /openapi.json` serves, it lists every route of §7, and `/docs` is Swagger UI on that document,
 * served from the package's own files. The YAML is written by `npm run openapi` (scripts/openapi.ts); when this test says the two
 * differ, run that.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildServer } from '../../src/api/server.js';
import { Service } from '../../src/api/service.js';
import { loadConfig } from '../../src/config/load.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { mcpRoutes } from '../../src/mcp-server/http.js';
import { OPENAPI_YAML, openApiYaml } from '../../scripts/openapi.js';

/** The routes of DESIGN §7's table. */
const SECTION_7: [string, string][] = [
  ['post', '/v1/runs'],
  ['post', '/v1/plan'],
  ['get', '/v1/runs'],
  ['get', '/v1/runs/{id}'],
  ['get', '/v1/runs/{id}/graph'],
  ['get', '/v1/runs/{id}/events'],
  ['post', '/v1/runs/{id}/cancel'],
  ['post', '/v1/runs/{id}/replan'],
  ['get', '/v1/runs/{id}/recording'],
  ['get', '/v1/reviews'],
  ['post', '/v1/reviews/{id}'],
  ['get', '/v1/tools'],
  ['post', '/v1/tools/{name}/invoke'],
  ['get', '/healthz'],
  ['get', '/metrics'],
];

type Doc = { openapi: string; paths: Record<string, Record<string, { summary?: string; responses: Record<string, unknown> }>> };

/** The routes a Fastify app registered, from `printRoutes` (`/:id` becomes `/{id}`), HEAD left out. */
function registeredRoutes(app: FastifyInstance): [string, string][] {
  const out: [string, string][] = [];
  const stack: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^([│ ]*)[├└]── (\S+) \(([^)]*)\)$/.exec(line.trimEnd());
    if (!m) continue;
    const depth = (m[1] as string).length / 4;
    stack.length = depth;
    stack.push(m[2] as string);
    const path = stack.join('').replace(/:(\w+)/g, '{$1}');
    for (const method of (m[3] as string).split(', ')) if (method !== 'HEAD') out.push([method.toLowerCase(), path]);
  }
  return out;
}

describe('openapi.yaml, /openapi.json and /docs', () => {
  let app: FastifyInstance;
  let service: Service;
  let base = '';

  beforeAll(async () => {
    service = new Service({ config: loadConfig(), store: createMemoryStore() });
    // As `toolgraph serve` mounts it: with /mcp (src/mcp-server).
    app = buildServer({ service, plugins: [mcpRoutes()] });
    await app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await app?.close();
    await service?.engine.close();
  });

  it('openapi.yaml parses to exactly the document GET /openapi.json serves (else: npm run openapi)', async () => {
    const res = await fetch(`${base}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const served = (await res.json()) as Doc;
    const text = readFileSync(OPENAPI_YAML, 'utf8');
    const file = parse(text) as Doc;
    expect(file, 'openapi.yaml differs from GET /openapi.json: run npm run openapi').toEqual(served);
    // And it is the file the script writes, byte for byte (nobody edited it by hand).
    expect(text === openApiYaml(), 'openapi.yaml is not what npm run openapi writes').toBe(true);
    expect(served.openapi).toMatch(/^3\.1\./);
  });

  it('documents every route of DESIGN §7, each with a summary and responses', async () => {
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as Doc;
    const missing = SECTION_7.filter(([method, path]) => !doc.paths[path]?.[method]);
    expect(missing, 'routes of §7 missing from the document').toEqual([]);
    for (const [method, path] of SECTION_7) {
      const op = doc.paths[path]?.[method];
      expect(op?.summary, `${method} ${path}`).toBeTruthy();
      expect(Object.keys(op?.responses ?? {}).length, `${method} ${path}`).toBeGreaterThan(0);
    }
  });

  it('documents only routes the server has (every path and method in the document is served)', () => {
    const doc = parse(readFileSync(OPENAPI_YAML, 'utf8')) as Doc;
    const served = new Set(registeredRoutes(app).map(([m, p]) => `${m} ${p}`));
    expect(served.size).toBeGreaterThan(10);
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`));
    expect(
      documented.filter((r) => !served.has(r)),
      'documented but not served',
    ).toEqual([]);
  });

  /*
   * §7: openapi.yaml "describes all of it" — every /v1 route the server registers, the streaming and
   * model-format routes and the dashboard's `GET /v1/stream` included (that one was missing at first).
   */
  it('documents every /v1 route the server registers', async () => {
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as Doc;
    const undocumented = registeredRoutes(app).filter(
      ([m, p]) => (p.startsWith('/v1') || p === '/healthz' || p === '/metrics') && !doc.paths[p]?.[m],
    );
    expect(undocumented).toEqual([]);
  });

  it('/docs is Swagger UI, served from local files, on the same document with this server first', async () => {
    const res = await fetch(`${base}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toMatch(/<!doctype html>/i);
    expect(html).toContain('<title>toolgraph API</title>');
    // Every script and stylesheet is the server's own (works offline, no CDN).
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] as string);
    expect(assets.some((a) => a.includes('swagger-ui-bundle.js'))).toBe(true);
    expect(assets.filter((a) => /^(https?:)?\/\//.test(a))).toEqual([]);
    for (const asset of assets.filter((a) => /\.(js|css)$/.test(a))) {
      const r = await fetch(new URL(asset, `${base}/docs/`));
      expect(r.status, asset).toBe(200);
    }
    const init = await (await fetch(`${base}/docs/static/swagger-initializer.js`)).text();
    expect(init).toContain('SwaggerUIBundle');
    // A missing file there is a 404 with the error body, for GET and HEAD alike (not a 405 "use HEAD").
    const missing = await fetch(`${base}/docs/static/no-such-file.js`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('not_found');
    expect((await fetch(`${base}/docs/static/no-such-file.js`, { method: 'HEAD' })).status).toBe(404);
    // The page's document is /openapi.json's, with the serving host as the first "try it out" server.
    const served = (await (await fetch(`${base}/openapi.json`)).json()) as Doc & { servers: { url: string }[] };
    const ui = (await (await fetch(`${base}/docs/json`)).json()) as Doc & { servers: { url: string }[] };
    expect(ui.paths).toEqual(served.paths);
    expect(ui.servers.map((s) => s.url)).toEqual(['/', ...served.servers.map((s) => s.url)]);
    for (const [method, path] of SECTION_7) expect(ui.paths[path]?.[method], `${method} ${path}`).toBeDefined();
  });
});
