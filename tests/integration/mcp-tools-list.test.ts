/**
 * `GET /v1/tools` (each tool's source; `?format=openai|anthropic` for the model, a bad format a 400)
 * and `toolgraph tools` in its four formats, on config tools (MCP tools are covered with real servers
 * in the other mcp-*.test.ts files).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { startApi, type Api } from '../helpers/server.js';

const yaml = `
tools:
  - { name: echo, description: Echoes, input: { type: object, properties: { x: { type: string } } }, reads: [], writes: [], executor: { kind: builtin } }
  - { name: Weather.get, executor: { kind: http, url: "http://127.0.0.1:9/w", headers: { Authorization: secret } } }
`;

describe('GET /v1/tools', () => {
  let api: Api;
  beforeAll(async () => {
    api = await startApi({ yaml });
  });
  afterAll(async () => {
    await api?.close();
  });

  it("marks each tool's source and hides header values", async () => {
    const r = await api.get('/v1/tools');
    expect(r.status).toBe(200);
    expect(r.body.items.map((t: { name: string; source: string }) => [t.name, t.source])).toEqual([
      ['echo', 'config'],
      ['Weather.get', 'config'],
    ]);
    expect(r.text).not.toContain('secret');
  });

  it("?format=openai and ?format=anthropic give the model's tool lists, renaming names the vendor refuses", async () => {
    const openai = await api.get('/v1/tools?format=openai');
    expect(openai.body).toEqual({
      tools: [
        {
          type: 'function',
          function: { name: 'echo', description: 'Echoes', parameters: { type: 'object', properties: { x: { type: 'string' } } } },
        },
        { type: 'function', function: { name: 'Weather_get', parameters: { type: 'object', properties: {} } } },
      ],
      skipped: [],
      renamed: [{ name: 'Weather.get', exported: 'Weather_get' }],
    });
    const anthropic = await api.get('/v1/tools?format=anthropic');
    expect(anthropic.body.tools).toEqual([
      { name: 'echo', description: 'Echoes', input_schema: { type: 'object', properties: { x: { type: 'string' } } } },
      { name: 'Weather_get', input_schema: { type: 'object', properties: {} } },
    ]);
  });

  it('an unknown format is a 400 naming it', async () => {
    const r = await api.get('/v1/tools?format=gemini');
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_request');
    expect(r.body.error.message).toMatch(/format/);
  });
});

describe('toolgraph tools', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-tools-'));
  const cfg = path.join(dir, 'toolgraph.yaml');
  writeFileSync(cfg, yaml);
  const cli = async (...argv: string[]) => {
    let out = '';
    let err = '';
    const code = await main(argv, { out: (s) => void (out += s), err: (s) => void (err += s), isTTY: false });
    return { code, out, err };
  };

  it('prints a table by default, and the demo catalog without --config', async () => {
    const r = await cli('tools', '--config', cfg);
    expect(r.code).toBe(0);
    expect(r.out.split('\n')[0]).toMatch(/^NAME\s+SOURCE\s+RISK\s+IDEMPOTENT\s+EFFECTS$/);
    expect(r.out).toMatch(/^echo\s+config\s+write\s+no\s+none$/m);
    expect(r.out).toMatch(/^Weather\.get\s+config\s+write\s+no\s+unknown \(writes \*\)$/m);
    const demo = await cli('tools');
    expect(demo.out).toMatch(/^sleep\s+builtin/m);
  });

  it('--format json|openai|anthropic print what the API serves', async () => {
    expect(JSON.parse((await cli('tools', '--config', cfg, '--format', 'json')).out).items[1]).toMatchObject({
      name: 'Weather.get',
      source: 'config',
      executor: { kind: 'http', url: 'http://127.0.0.1:9/w' },
    });
    expect(JSON.parse((await cli('tools', '--config', cfg, '--format', 'openai')).out).renamed).toEqual([
      { name: 'Weather.get', exported: 'Weather_get' },
    ]);
    expect(JSON.parse((await cli('tools', '--config', cfg, '--format', 'anthropic')).out).tools[0].name).toBe('echo');
  });

  it('a bad format is exit 2', async () => {
    const r = await cli('tools', '--format', 'yaml');
    expect(r.code).toBe(2);
    expect(r.err).toContain('--format must be table, json, openai or anthropic, got "yaml"');
  });
});
