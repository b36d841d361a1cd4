/**
 * docs/configuration.md is generated from the config schema (`npm run docs:config`): this fails when
 * the file is not what the script writes now, so the reference cannot drift from the schema. It also
 * checks the generator itself: every key of the schema gets a row, with its default and type.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CONFIG_DOC, configReference, configRows, yamlInline } from '../../scripts/config-docs.js';

describe('docs/configuration.md', () => {
  it('is what npm run docs:config writes (else run it)', () => {
    const file = readFileSync(CONFIG_DOC, 'utf8');
    expect(file === configReference(), 'docs/configuration.md is stale: run npm run docs:config').toBe(true);
  });

  it('has a row for every key, with what the schema says of it', () => {
    const rows = new Map(configRows().map((r) => [`${r.path}${r.variant ? ` (${r.variant})` : ''}`, r]));
    for (const top of ['tools', 'policy', 'limits', 'defaults', 'auth', 'server']) expect(rows.has(top), top).toBe(true);
    expect(rows.get('tools[].retry.backoffMs')).toMatchObject({ type: 'integer ≥ 0', default: 200, required: false });
    expect(rows.get('tools[].retry.attempts')).toMatchObject({ required: true });
    expect(rows.get('defaults.failure')).toMatchObject({ type: 'one of `fail_fast`, `partial`, `replan`', default: 'partial' });
    expect(rows.get('server.port')).toMatchObject({ type: 'integer 0–65535', default: 8080 });
    expect(rows.get('tools[].executor.url (kind: http)')).toMatchObject({ required: true });
    expect(rows.get('limits.tenant.<name>')).toBeDefined();
    // Every row says what the key does.
    expect([...rows.values()].filter((r) => r.description === '(undocumented)').map((r) => r.path)).toEqual([]);
    // And the page lists every row.
    const page = configReference();
    for (const r of rows.values()) expect(page, r.path).toContain(/[.[]/.test(r.path) ? `| \`${r.path}\`` : `## \`${r.path}\``);
  });

  it("every key's example reads back as the value it shows", () => {
    const rows = configRows().filter((r) => r.example !== undefined);
    expect(rows.length).toBeGreaterThan(40);
    for (const r of rows) {
      const leaf = r.path.split('.').pop()!.replace(/\[\]$/, '');
      const text = yamlInline(leaf, r.example).slice(1, -1).replace(/\\\|/g, '|');
      expect(parse(text), r.path).toEqual({ [leaf]: r.example });
    }
  });
});
