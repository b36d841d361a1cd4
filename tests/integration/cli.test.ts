/**
 * `toolgraph plan` and `toolgraph run` as a user meets them: exit codes (0 ok, 1 diagnostics or a run
 * that did not succeed, 2 bad input with a message naming the file and the problem, never a stack
 * trace), the output formats, and `--record`. Driven through `main(argv, io)` with a capturing io, and
 * once through the real bin in a child process.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';

const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-cli-'));
const file = (name: string, text: string) => {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
};

const cli = (...argv: string[]) => runCli(argv);

const GOOD = file(
  'good.json',
  JSON.stringify({
    calls: [
      { id: 'read', tool: 'read_file', args: { path: '/repo/a.ts' } },
      { id: 'write', tool: 'write_file', args: { path: '/repo/a.ts', content: '${read.output.path}' } },
      { id: 'nap', tool: 'sleep', args: { ms: 5 } },
    ],
  }),
);
const CYCLE = file(
  'cycle.json',
  JSON.stringify({
    calls: [
      { id: 'a', tool: 'echo', args: { x: '${b.output}' } },
      { id: 'b', tool: 'echo', args: { x: '${a.output}' } },
    ],
  }),
);
const FAILING = file(
  'failing.json',
  JSON.stringify({
    calls: [
      { id: 'f', tool: 'fail', args: { message: 'boom' } },
      { id: 'e', tool: 'echo' },
    ],
  }),
);

describe('toolgraph plan', () => {
  it('prints nodes, edges with kind and reason, generations and no diagnostics: exit 0', async () => {
    const r = await cli('plan', GOOD);
    expect(r.code).toBe(0);
    const plan = JSON.parse(r.out);
    expect(plan.nodes.map((n: { id: string }) => n.id)).toEqual(['read', 'write', 'nap']);
    expect(plan.edges).toEqual([{ from: 'read', to: 'write', kind: 'data', reason: 'write uses ${read.output}' }]);
    expect(plan.generations).toEqual([['read', 'nap'], ['write']]);
    expect(plan.diagnostics).toEqual([]);
  });

  it('exits 1 with the cycle in the diagnostics', async () => {
    const r = await cli('plan', CYCLE);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.out).diagnostics).toEqual([expect.objectContaining({ code: 'cycle', callIds: ['a', 'b', 'a'] })]);
  });

  it("takes a bare array of calls as the batch (the body's calls), and still rejects other shapes", async () => {
    const bare = file('bare.json', JSON.stringify(JSON.parse(readFileSync(GOOD, 'utf8')).calls));
    const r = await cli('plan', bare);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).edges).toEqual(JSON.parse((await cli('plan', GOOD)).out).edges);
    const scalar = await cli('plan', file('scalar.json', '42'));
    expect(scalar.code).toBe(2);
    expect(scalar.err).toMatch(/scalar\.json: not a valid batch/);
  });

  it('renders Mermaid and DOT', async () => {
    expect((await cli('plan', GOOD, '--format', 'mermaid')).out).toMatch(/^flowchart TD\n/);
    expect((await cli('plan', GOOD, '--format', 'dot')).out).toMatch(/^digraph toolgraph \{/);
  });

  it.each([
    ['a missing file', () => [path.join(dir, 'nope.json')], /nope\.json: cannot read the batch: no such file/],
    ['invalid JSON', () => [file('broken.json', '{"calls": [')], /broken\.json: the batch is not valid JSON/],
    ['an empty file', () => [file('empty.json', '')], /empty\.json: the batch is empty/],
    [
      'a call without a tool',
      () => [file('notool.json', '{"calls":[{"id":"a"}]}')],
      /notool\.json: not a valid batch:\n {2}- calls\[0\]\.tool: /,
    ],
    [
      'duplicate ids',
      () => [file('dup.json', '{"calls":[{"id":"a","tool":"echo"},{"id":"a","tool":"echo"}]}')],
      /calls\[1\]\.id: duplicate call id a/,
    ],
    ['a bad format', () => [GOOD, '--format', 'svg'], /--format must be json, mermaid or dot, got "svg"/],
    ['a broken config', () => [GOOD, '--config', file('bad.yaml', 'limits:\n  global: 0\n')], /bad\.yaml: .*limits\.global/],
    ['a YAML syntax error', () => [GOOD, '--config', file('syntax.yaml', 'tools: [\n')], /syntax\.yaml/],
  ])('exits 2 for %s, with a message and no stack trace', async (_what, argv, message) => {
    const r = await cli('plan', ...argv());
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
    expect(r.err).not.toMatch(/\n\s+at /);
    expect(r.out).toBe('');
  });
});

describe('toolgraph run', () => {
  it('runs in process and prints the table in submission order: exit 0', async () => {
    const r = await cli('run', GOOD);
    expect(r.code).toBe(0);
    const rows = r.out.split('\n').filter((l) => /^(read|write|nap) /.test(l));
    expect(rows.map((l) => l.split(/\s+/).slice(0, 4))).toEqual([
      ['read', 'read_file', 'succeeded', '1'],
      ['write', 'write_file', 'succeeded', '1'],
      ['nap', 'sleep', 'succeeded', '1'],
    ]);
    expect(r.out).toMatch(/: succeeded\n/);
    expect(r.err).toMatch(/read started \(attempt 1\)/);
  });

  it('prints the run of §7 with --json, and exits 1 when it did not succeed', async () => {
    const r = await cli('run', FAILING, '--json');
    expect(r.code).toBe(1);
    const run = JSON.parse(r.out);
    expect(run.status).toBe('partial');
    expect(run.calls.map((c: { id: string; status: string }) => [c.id, c.status])).toEqual([
      ['f', 'failed'],
      ['e', 'succeeded'],
    ]);
    expect(run.calls[0].error).toMatchObject({ code: 'tool_error' });
  });

  it('--failure fail_fast changes the mode; a bad mode is exit 2', async () => {
    const r = await cli('run', FAILING, '--json', '--failure', 'fail_fast');
    expect(JSON.parse(r.out).failure).toBe('fail_fast');
    const bad = await cli('run', FAILING, '--failure', 'sometimes');
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/--failure must be fail_fast, partial or replan/);
  });

  it("--priority (or the batch file's priority) is the run's; out of 1..5 is exit 2", async () => {
    expect(JSON.parse((await cli('run', FAILING, '--json', '--priority', '1')).out).priority).toBe(1);
    const prioritized = file('prioritized.json', JSON.stringify({ calls: [{ id: 'e', tool: 'echo', args: {} }], priority: 5 }));
    expect(JSON.parse((await cli('run', prioritized, '--json')).out).priority).toBe(5);
    expect(JSON.parse((await cli('run', prioritized, '--json', '--priority', '2')).out).priority).toBe(2);
    const bad = await cli('run', FAILING, '--priority', '0');
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/--priority must be 1 \(most urgent\) to 5, got "0"/);
    const badFile = await cli('run', file('bad-priority.json', JSON.stringify({ calls: [], priority: 7 })));
    expect(badFile.code).toBe(2);
    expect(badFile.err).toMatch(/bad-priority\.json: not a valid batch:[\s\S]*priority/);
  });

  it('rejects reviews without --approve and approves them with it', async () => {
    const deploy = file(
      'deploy.json',
      JSON.stringify({
        calls: [
          { id: 't', tool: 'run_tests', args: { ms: 1 } },
          { id: 'd', tool: 'deploy', args: { name: 'web', image: 'i' } },
        ],
      }),
    );
    const rejected = await cli('run', deploy, '--json');
    expect(rejected.code).toBe(1);
    expect(JSON.parse(rejected.out).calls[1].error.code).toBe('review_rejected');
    const approved = await cli('run', deploy, '--json', '--approve');
    expect(approved.code).toBe(0);
  });

  it('--record writes a recording that replays', async () => {
    const rec = path.join(dir, 'rec.json');
    expect((await cli('run', GOOD, '--record', rec)).code).toBe(0);
    expect(JSON.parse(readFileSync(rec, 'utf8')).format).toBe('toolgraph.recording/v1');
    const replay = await cli('replay', rec);
    expect(replay.code).toBe(0);
  });

  it('exits 2 for a bad batch, naming the file', async () => {
    const r = await cli('run', path.join(dir, 'missing.json'));
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/missing\.json: cannot read the batch/);
  });
});

describe('the toolgraph command', () => {
  it('runs through the real bin, and an unknown command is exit 2 with the usage', async () => {
    const run = promisify(execFile);
    const { stdout } = await run('node', ['bin/toolgraph.mjs', 'plan', GOOD]);
    expect(JSON.parse(stdout).edges).toHaveLength(1);
    const err = await run('node', ['bin/toolgraph.mjs', 'frobnicate']).catch((e: { code: number; stderr: string }) => e);
    expect(err).toMatchObject({ code: 2 });
    expect((err as { stderr: string }).stderr).toMatch(/unknown command "frobnicate"[\s\S]*Usage:/);
  });
});
