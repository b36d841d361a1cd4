// Resource keys (DESIGN §3): segments, overlap, template expansion, declared effects, and the
// conflicts they give in buildPlan.
import { describe, expect, it } from 'vitest';
import { buildPlan } from '../../src/core/plan.js';
import { accessOf, expandTemplate, overlaps, parseKey } from '../../src/core/resources.js';
import { catalogOf, tool } from '../helpers/catalog.js';

describe('parseKey', () => {
  it.each([
    ['file:/repo/src/a.ts', ['file', 'repo', 'src', 'a.ts']],
    ['service:prod:web', ['service', 'prod', 'web']],
    ['*', ['*']],
    ['file:*', ['file', '*']],
    ['a//b::c/', ['a', 'b', 'c']],
    ['', []],
    ['file:/repo/./a.ts', ['file', 'repo', 'a.ts']],
    ['file:/repo/src/../a.ts', ['file', 'repo', 'a.ts']],
    ['file:/repo/a/b/../../c', ['file', 'repo', 'c']],
    ['file:/repo/../../etc', ['file', '*']],
    ['file:../x', ['file', '*']],
    ['/repo/../x', ['x']],
    ['../x', ['*']],
    ['service:prod:..', ['service']],
    ['file:/repo/.../a', ['file', 'repo', '...', 'a']],
  ])('%j → %j', (text, segs) => {
    expect(parseKey(text)).toEqual(segs);
  });
});

describe('overlaps', () => {
  it.each([
    ['file:/repo/src', 'file:/repo/src', true],
    ['file:/repo/src', 'file:/repo/src/a.ts', true],
    ['file:/repo/src/a.ts', 'file:/repo/src', true],
    ['file:/repo/src', 'file:/repo/srcx', false],
    ['file:/repo/src', 'file:/repo/sr', false],
    ['file:/repo/src/a.ts', 'file:/repo/src/b.ts', false],
    ['file:/a', 'db:/a', false],
    ['file', 'file:/anything/at/all', true],
    ['file:*', 'file:/repo/src/a.ts', true],
    ['file:*', 'file', true],
    ['file:*', 'db:x', false],
    ['*', 'file:/repo', true],
    ['*', 'service:prod:web', true],
    ['*', '*', true],
    ['service:*:web', 'service:prod:web', true],
    ['service:*:web', 'service:prod:db', false],
    ['service:*:web', 'service:prod', true],
    ['service:*:web', 'service:*:db', false],
    ['service:*:web', 'service:prod:*', true],
    ['service:*:web', 'service:prod:web:pod1', true],
    ['service:prod:web', 'service:staging:web', false],
    ['file:/repo/*/a.ts', 'file:/repo/src/a.ts', true],
    ['file:/repo/*/a.ts', 'file:/repo/src/b.ts', false],
    ['file:/repo/./a.ts', 'file:/repo/a.ts', true],
    ['file:/repo/src/../a.ts', 'file:/repo/b.ts', false],
    ['file:/repo/../../x', 'file:/etc/passwd', true],
  ])('%s ∩ %s → %s', (a, b, expected) => {
    expect(overlaps(parseKey(a), parseKey(b))).toBe(expected);
    expect(overlaps(parseKey(b), parseKey(a))).toBe(expected);
  });
});

describe('expandTemplate', () => {
  it.each<[string, string, unknown, string]>([
    ['a string arg', 'file:{path}', { path: '/repo/a.ts' }, 'file:/repo/a.ts'],
    ['two args', 'service:{namespace}:{name}', { namespace: 'prod', name: 'web' }, 'service:prod:web'],
    ['a missing arg', 'file:{path}', {}, 'file:*'],
    ['a missing second arg', 'service:{namespace}:{name}', { namespace: 'prod' }, 'service:prod:*'],
    ['a missing first arg cuts there', 'service:{namespace}:{name}', { name: 'web' }, 'service:*'],
    ['an arg holding a reference', 'file:{path}', { path: '${c1.output.path}' }, 'file:*'],
    ['an arg holding an interpolation', 'file:/repo/{path}', { path: 'src/${c1.output}' }, 'file:/repo/*'],
    ['a nested arg', 'service:{svc.ns}:{svc.name}', { svc: { ns: 'prod', name: 'web' } }, 'service:prod:web'],
    ['a missing nested arg', 'service:{svc.ns}:{svc.name}', { svc: { ns: 'prod' } }, 'service:prod:*'],
    ['a nested arg under a non-object', 'service:{svc.ns}', { svc: 'prod' }, 'service:*'],
    ['a number', 'row:{table}/{id}', { table: 'users', id: 42 }, 'row:users/42'],
    ['a boolean', 'flag:{on}', { on: true }, 'flag:true'],
    ['null is unknown', 'file:{path}', { path: null }, 'file:*'],
    ['an object is unknown', 'file:{path}', { path: { a: 1 } }, 'file:*'],
    ['an array is unknown', 'file:{path}', { path: ['a'] }, 'file:*'],
    ['a placeholder mid-segment cuts the whole segment', 'file:/repo/{name}.txt', {}, 'file:/repo/*'],
    ['a placeholder mid-segment, known', 'file:/repo/{name}.txt', { name: 'a' }, 'file:/repo/a.txt'],
    ['a template that is only a placeholder', '{path}', {}, '*'],
    ['no placeholder', 'db:main', { x: 1 }, 'db:main'],
    ['args that are not an object', 'file:{path}', null, 'file:*'],
    ['only own properties count', 'file:{toString}', {}, 'file:*'],
  ])('%s: %s with %j → %s', (_label, template, args, expected) => {
    expect(expandTemplate(template, args)).toBe(expected);
  });
});

describe('accessOf', () => {
  const texts = (a: ReturnType<typeof accessOf>) => ({ reads: a.reads.map((k) => k.text), writes: a.writes.map((k) => k.text) });

  it.each<[string, { reads?: string[]; writes?: string[] }, unknown, { reads: string[]; writes: string[] }]>([
    ['nothing declared: unknown effects write *', {}, {}, { reads: [], writes: ['*'] }],
    ['both empty: pure', { reads: [], writes: [] }, {}, { reads: [], writes: [] }],
    ['only reads declared', { reads: ['file:{p}'] }, { p: 'a' }, { reads: ['file:a'], writes: [] }],
    ['only writes declared', { writes: ['file:{p}'] }, { p: 'a' }, { reads: [], writes: ['file:a'] }],
    [
      'a read that is also written counts as a write',
      { reads: ['file:{p}', 'db:x'], writes: ['file:{p}'] },
      { p: 'a' },
      { reads: ['db:x'], writes: ['file:a'] },
    ],
    ['duplicates collapse', { reads: ['file:{p}', 'file:{q}'], writes: [] }, { p: 'a', q: 'a' }, { reads: ['file:a'], writes: [] }],
    [
      'unknown args widen',
      { reads: ['file:{p}'], writes: ['svc:{ns}:{n}'] },
      { ns: 'prod' },
      { reads: ['file:*'], writes: ['svc:prod:*'] },
    ],
  ])('%s', (_label, decl, args, expected) => {
    expect(texts(accessOf(decl, args))).toEqual(expected);
  });

  it('shares one frozen access per value of a single placeholder, and keeps values apart', () => {
    const decl = { reads: ['file:/repo/{path}.ts'] };
    const a = accessOf(decl, { path: 'a' });
    expect(accessOf(decl, { path: 'a', other: 1 })).toBe(a);
    expect(Object.isFrozen(a) && Object.isFrozen(a.reads)).toBe(true);
    expect(texts(a)).toEqual({ reads: ['file:/repo/a.ts'], writes: [] });
    expect(texts(accessOf(decl, { path: 'b' }))).toEqual({ reads: ['file:/repo/b.ts'], writes: [] });
    // A number and the string of it name one key; a reference or a missing arg widens, as ever.
    expect(texts(accessOf(decl, { path: 7 }))).toEqual({ reads: ['file:/repo/7.ts'], writes: [] });
    expect(texts(accessOf(decl, { path: '${c1.output}' }))).toEqual({ reads: ['file:/repo/*'], writes: [] });
    expect(texts(accessOf(decl, {}))).toEqual({ reads: ['file:/repo/*'], writes: [] });
    // The same template written by another tool is a write there.
    expect(texts(accessOf({ writes: ['file:/repo/{path}.ts'] }, { path: 'a' }))).toEqual({ reads: [], writes: ['file:/repo/a.ts'] });
  });
});

describe('resource conflicts in buildPlan', () => {
  const catalog = catalogOf([
    tool('read', { reads: ['{key}'], writes: [] }),
    tool('write', { reads: [], writes: ['{key}'] }),
    tool('read_file', { reads: ['file:{path}'], writes: [] }),
    tool('write_file', { reads: [], writes: ['file:{path}'] }),
    tool('deploy', { reads: [], writes: ['service:{namespace}:{name}'] }),
    tool('unknown'),
    tool('pure', { reads: [], writes: [] }),
    tool('reads_nothing', { reads: [] }),
  ]);
  type C = { id: string; tool: string; args?: Record<string, unknown> };
  const conflicts = (calls: C[]) =>
    buildPlan({ calls, tenant: 'acme', catalog, policy: { rules: [] } })
      .edges.filter((e) => e.kind === 'conflict')
      .map((e) => `${e.from}>${e.to} ${e.reason}`);

  it.each<[string, C[], string[]]>([
    [
      'equal keys',
      [
        { id: 'w', tool: 'write', args: { key: 'db:users' } },
        { id: 'r', tool: 'read', args: { key: 'db:users' } },
      ],
      ['w>r read-after-write on db:users'],
    ],
    [
      'a prefix at a segment boundary overlaps',
      [
        { id: 'w', tool: 'write_file', args: { path: '/repo/src' } },
        { id: 'r', tool: 'read_file', args: { path: '/repo/src/a.ts' } },
      ],
      ['w>r read-after-write on file:/repo/src'],
    ],
    [
      'a longer key written before its prefix is read',
      [
        { id: 'w', tool: 'write_file', args: { path: '/repo/src/a.ts' } },
        { id: 'r', tool: 'read_file', args: { path: '/repo/src' } },
      ],
      ['w>r read-after-write on file:/repo/src/a.ts'],
    ],
    [
      'two spellings of one path are one file',
      [
        { id: 'w1', tool: 'write_file', args: { path: '/repo/./a.ts' } },
        { id: 'w2', tool: 'write_file', args: { path: '/repo/src/../a.ts' } },
        { id: 'w3', tool: 'write_file', args: { path: '/repo//a.ts' } },
      ],
      ['w1>w2 write-after-write on file:/repo/./a.ts', 'w2>w3 write-after-write on file:/repo/src/../a.ts'],
    ],
    [
      'a prefix inside a segment does not overlap',
      [
        { id: 'w', tool: 'write_file', args: { path: '/repo/src' } },
        { id: 'r', tool: 'read_file', args: { path: '/repo/srcx' } },
      ],
      [],
    ],
    [
      'file:* overlaps every file',
      [
        { id: 'r1', tool: 'read_file', args: { path: '/a' } },
        { id: 'r2', tool: 'read_file', args: { path: '/b/c' } },
        { id: 'r3', tool: 'read', args: { key: 'db:x' } },
        { id: 'w', tool: 'write', args: { key: 'file:*' } },
      ],
      ['r1>w write-after-read on file:/a', 'r2>w write-after-read on file:/b/c'],
    ],
    [
      '* overlaps everything',
      [
        { id: 'r1', tool: 'read_file', args: { path: '/a' } },
        { id: 'r2', tool: 'read', args: { key: 'db:x' } },
        { id: 'w', tool: 'write', args: { key: '*' } },
        { id: 'r3', tool: 'read', args: { key: 'queue:q' } },
      ],
      ['r1>w write-after-read on file:/a', 'r2>w write-after-read on db:x', 'w>r3 read-after-write on *'],
    ],
    [
      'service:*:web overlaps only the web services',
      [
        { id: 'd1', tool: 'deploy', args: { namespace: 'prod', name: 'web' } },
        { id: 'd2', tool: 'deploy', args: { namespace: 'staging', name: 'db' } },
        { id: 'r', tool: 'read', args: { key: 'service:*:web' } },
        { id: 'd3', tool: 'deploy', args: { namespace: 'dev', name: 'web' } },
      ],
      ['d1>r read-after-write on service:prod:web', 'r>d3 write-after-read on service:*:web'],
    ],
    [
      'a missing arg widens to a wildcard at its segment',
      [
        { id: 'w1', tool: 'write_file', args: { path: '/a' } },
        { id: 'w2', tool: 'write_file', args: {} },
        { id: 'r', tool: 'read_file', args: { path: '/b' } },
        { id: 'd', tool: 'deploy', args: { namespace: 'prod', name: 'web' } },
      ],
      ['w1>w2 write-after-write on file:/a', 'w2>r read-after-write on file:*'],
    ],
    [
      'an arg holding a reference widens too',
      [
        { id: 'src', tool: 'pure' },
        { id: 'w1', tool: 'write_file', args: { path: '/a' } },
        { id: 'w2', tool: 'write_file', args: { path: '${src.output.path}' } },
        { id: 'w3', tool: 'write_file', args: { path: '/b' } },
      ],
      ['w1>w2 write-after-write on file:/a', 'w2>w3 write-after-write on file:*'],
    ],
    [
      'a narrower write does not hide a wider one from a third key',
      [
        { id: 'm', tool: 'write', args: { key: 'a:*' } },
        { id: 'n', tool: 'write', args: { key: 'a:b' } },
        { id: 'r', tool: 'read', args: { key: 'a:c' } },
      ],
      ['m>n write-after-write on a:*', 'm>r read-after-write on a:*'],
    ],
    [
      'a narrower write does not hide a wider one, deeper down',
      [
        { id: 'm', tool: 'write', args: { key: 'a:*:x' } },
        { id: 'n', tool: 'write', args: { key: 'a:b:x' } },
        { id: 'r', tool: 'read', args: { key: 'a:c:x' } },
        { id: 'q', tool: 'read', args: { key: 'a:c:y' } },
      ],
      ['m>n write-after-write on a:*:x', 'm>r read-after-write on a:*:x'],
    ],
    [
      'an empty key overlaps everything',
      [
        { id: 'w', tool: 'write_file', args: { path: '/' } },
        { id: 'e', tool: 'write', args: { key: '' } },
        { id: 'r', tool: 'read', args: { key: 'db:x' } },
      ],
      ['w>e write-after-write on file:/', 'e>r read-after-write on '],
    ],
    [
      'a tool that declares nothing conflicts with every call that touches anything',
      [
        { id: 'r', tool: 'read_file', args: { path: '/a' } },
        { id: 'u', tool: 'unknown', args: {} },
        { id: 'w', tool: 'write', args: { key: 'db:x' } },
        { id: 'p', tool: 'pure' },
        { id: 'n', tool: 'reads_nothing' },
        { id: 'u2', tool: 'unknown' },
      ],
      // u>u2 is implied by u>w>u2, but the `*` entry must stay for keys that db:x does not cover
      ['r>u write-after-read on file:/a', 'u>w write-after-write on *', 'u>u2 write-after-write on *', 'w>u2 write-after-write on db:x'],
    ],
    [
      'pure calls conflict with nothing, not even unknown effects',
      [
        { id: 'u1', tool: 'unknown' },
        { id: 'p1', tool: 'pure' },
        { id: 'p2', tool: 'pure' },
        { id: 'u2', tool: 'unknown' },
      ],
      ['u1>u2 write-after-write on *'],
    ],
  ])('%s', (_label, calls, expected) => {
    expect(conflicts(calls)).toEqual(expected);
  });
});
