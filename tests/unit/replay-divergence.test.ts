// Divergences (DESIGN §9): a changed output, a changed policy rule, a changed limit, an attempt the
// recording lacks, a call it never started — each makes `toolgraph replay` exit 1 with a readable diff
// (which call, what was recorded, what replay gave, the first start that differs). Plus the reports:
// --json, --junit, and the what-if summary of --config.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Recording } from '../../src/contract/recording.js';
import { runCli } from '../helpers/cli.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const EXAMPLES = path.join(ROOT, 'examples/recordings');
const CONFIG_TEXT = readFileSync(path.join(EXAMPLES, 'config.yaml'), 'utf8');
const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-replay-div-'));

const replay = (...args: string[]) => runCli(['replay', ...args]);

function example(name: string): Recording {
  return JSON.parse(readFileSync(path.join(EXAMPLES, `${name}.json`), 'utf8')) as Recording;
}

function save(name: string, rec: unknown): string {
  const file = path.join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(rec, null, 2));
  return file;
}

function config(name: string, edit: (yaml: string) => string): string {
  const file = path.join(dir, `${name}.yaml`);
  const text = edit(CONFIG_TEXT);
  expect(text).not.toBe(CONFIG_TEXT);
  writeFileSync(file, text);
  return file;
}

describe('a changed output', () => {
  it('diverges with exit 1, naming the call, the recorded and the replayed output', async () => {
    const rec = example('deploy-approval');
    const build = rec.attempts.find((a) => a.callId === 'build') as Recording['attempts'][number];
    build.output = { ms: 41 };
    const file = save('changed-output', rec);
    const r = await replay(file);
    expect(r.code).toBe(1);
    expect(r.out).toContain(`DIVERGED ${file} (run run_example_deploy_approval)`);
    expect(r.out).toContain('- call build (build_image): differs in output');
    expect(r.out).toMatch(/ {6}recorded: succeeded, after 1 attempt, first started at 0 ms, output \{"ms":40\}/);
    expect(r.out).toMatch(/ {6}replay: {3}succeeded, after 1 attempt, first started at 0 ms, output \{"ms":41\}/);
    expect(r.out).toContain('      output first differs at ms: recorded 40, replay 41\n');
    expect(r.out).toContain('  first start that differs: none (every start as recorded)\n');
    // deploy's args take ${build.output}, but its outcome is the recorded one: only build differs.
    expect(r.out).toContain('): 1 divergence\n');
    expect(r.out).toContain('1 recording: 0 match, 1 diverged, 0 unreadable');
  });
});

describe('a changed policy rule', () => {
  it('--config denying a tool: outcomes that change, the diff per call, makespan before and after', async () => {
    const cfg = config('deny-writes', (y) =>
      y.replace('policy:\n  rules:\n', 'policy:\n  rules:\n    - match: { tool: write_file }\n      deny: frozen repository\n'),
    );
    const r = await replay(path.join(EXAMPLES, 'code-edit-hazards.json'), '--config', cfg);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(
      new RegExp(
        `makespan ${example('code-edit-hazards').result.endMs} ms recorded → \\d+ ms under ${cfg.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`,
      ),
    );
    expect(r.out).toContain(`outcomes that change under ${cfg}: edit_a, edit_b, changelog`);
    expect(r.out).toContain('- call edit_a (write_file): differs in status, error, attempts');
    expect(r.out).toMatch(
      /recorded: succeeded, after 1 attempt, first started at \d+ ms, output \{"path":"\/repo\/src\/a.ts","content":"patched \/repo\/src\/a.ts"\}/,
    );
    expect(r.out).toContain('replay:   failed, never started, policy_denied: edit_a: frozen repository');
    expect(r.out).toMatch(/first start that differs: edit_a \(attempt 1\): recorded at \d+ ms; replay never started it/);
  });

  it('a recording whose policy no longer asks for review: the recorded review is reported unused', async () => {
    const rec = example('deploy-approval');
    rec.config.policy.rules = rec.config.policy.rules.filter((rule) => rule.review !== true);
    rec.config.policy.rules.push({ match: { tool: 'deploy' }, review: false });
    const r = await replay(save('no-review', rec));
    expect(r.code).toBe(1);
    const at = (rec.reviews[0] as Recording['reviews'][number]).atMs;
    expect(r.out).toContain(
      `- recorded input: the approve review of deploy (recorded at ${at} ms) was never applied: the call did not await review then or later`,
    );
  });
});

describe('a changed limit', () => {
  it('--config with limits.global 1 reorders starts: the first start that differs is named', async () => {
    const cfg = config('global-1', (y) => y.replace(/^ {2}global: 8$/m, '  global: 1'));
    const r = await replay(path.join(EXAMPLES, 'flaky-search-retries.json'), '--config', cfg);
    expect(r.code).toBe(1);
    expect(r.out).toContain(`outcomes that change under ${cfg}: none`);
    expect(r.out).toMatch(/- order of starts: \d+ starts out of order\n/);
    expect(r.out).toMatch(
      /first start that differs: (s\d|sum) \(attempt \d\): recorded at \d+ ms, after (s\d) \(attempt \d\) at \d+ ms; replay started it at \d+ ms, before \2 at \d+ ms/,
    );
    const before = example('flaky-search-retries').result.endMs as number;
    const after = Number(/makespan \d+ ms recorded → (\d+) ms under/.exec(r.out)?.[1]);
    expect(after).toBeGreaterThan(before);
  });

  it('--config with more retry attempts wants an attempt the recording lacks: a divergence, not a crash', async () => {
    const cfg = config('more-retries', (y) =>
      y.replace('retry: { attempts: 4, backoffMs: 40, maxBackoffMs: 300 }', 'retry: { attempts: 5, backoffMs: 40, maxBackoffMs: 300 }'),
    );
    const r = await replay(path.join(EXAMPLES, 'flaky-search-retries.json'), '--config', cfg);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(
      /- s4 \(attempt 5\) at \d+ ms: not in the recording: attempt 5 of s4 \(the recording has 4\); replay ended it as a failure/,
    );
    expect(r.out).toContain('- call s4 (web_search): differs in attempts');
    expect(r.out).toMatch(/first start that differs: s4 \(attempt 5\): replay started it at \d+ ms; the recording never did/);
  });

  it('--config with a lower timeout cuts a longer recorded attempt short as a timeout', async () => {
    const cfg = config('timeout-5', (y) => y.replace('  - name: typecheck\n', '  - name: typecheck\n    timeoutMs: 5\n'));
    const r = await replay(path.join(EXAMPLES, 'deploy-approval.json'), '--config', cfg);
    expect(r.code).toBe(1);
    expect(r.out).toContain('- call types (typecheck): differs in status, error');
    expect(r.out).toContain('replay:   failed, after 1 attempt, first started at 0 ms, timeout: timed out after 5 ms');
    expect(r.out).toMatch(
      /- call deploy \(deploy\): differs in status, error, attempts\n.*\n {6}replay: {3}blocked, never started, dependency_failed: types failed/,
    );
  });

  it('a limit that only slows things down changes the makespan and nothing else: exit 0', async () => {
    const cfg = config('global-2', (y) => y.replace(/^ {2}global: 8$/m, '  global: 2'));
    const r = await replay(path.join(EXAMPLES, 'deploy-approval.json'), '--config', cfg);
    expect(r.out).toMatch(
      /MATCH {4}\S+deploy-approval.json \(run run_example_deploy_approval, succeeded, makespan \d+ ms recorded → \d+ ms under /,
    );
    expect(r.code).toBe(0);
  });
});

describe('attempts the recording lacks', () => {
  it('an attempt removed from a recording: reported, and its effects diffed', async () => {
    const rec = example('flaky-search-retries');
    rec.attempts = rec.attempts.filter((a) => !(a.callId === 's1' && a.attempt === 3));
    const r = await replay(save('lacks-attempt', rec));
    expect(r.code).toBe(1);
    expect(r.out).toMatch(
      /- s1 \(attempt 3\) at \d+ ms: not in the recording: attempt 3 of s1 \(the recording has 2\); replay ended it as a failure/,
    );
    expect(r.out).toContain('- call s1 (web_search): differs in status, error');
    expect(r.out).toContain('- call sum (summarize): differs in status, error, attempts');
    expect(r.out).toMatch(/replay: {3}blocked, never started, dependency_failed: s1 failed/);
  });

  it('a call the recording never started', async () => {
    const rec = example('deploy-approval');
    const at = (rec.attempts.find((a) => a.callId === 'announce') as Recording['attempts'][number]).startMs;
    rec.attempts = rec.attempts.filter((a) => a.callId !== 'announce');
    const r = await replay(save('never-started', rec));
    expect(r.code).toBe(1);
    expect(r.out).toContain(
      `- announce (attempt 1) at ${at} ms: not in the recording: attempt 1 of announce (the recording never started it); replay ended it as a failure`,
    );
    expect(r.out).toContain('- run status: recorded succeeded, replay partial');
  });

  it('an attempt the recording shows aborted, which replay no longer aborts', async () => {
    const rec = example('cancelled-build');
    delete rec.cancelledAtMs;
    const r = await replay(save('not-cancelled', rec));
    expect(r.code).toBe(1);
    expect(r.out).toMatch(
      /img_api \(attempt 1\) at \d+ ms: not in the recording: attempt 1 of img_api \(the recording aborted it after \d+ ms\)/,
    );
  });
});

describe('reports', () => {
  it('--json is a machine-readable report of every divergence', async () => {
    const rec = example('deploy-approval');
    (rec.attempts.find((a) => a.callId === 'types') as Recording['attempts'][number]).output = { ms: 1 };
    const r = await replay(save('json-report', rec), path.join(EXAMPLES, 'code-edit-hazards.json'), '--json');
    expect(r.code).toBe(1);
    const report = JSON.parse(r.out);
    expect(report).toMatchObject({
      format: 'toolgraph.replay-report/v1',
      tolerance: 5,
      summary: { recordings: 2, match: 1, diverged: 1, unreadable: 0 },
    });
    expect(report.recordings[0].divergences).toEqual([
      {
        kind: 'call',
        callId: 'types',
        tool: 'typecheck',
        fields: ['output'],
        recorded: expect.objectContaining({ status: 'succeeded', output: { ms: 25 } }),
        replay: expect.objectContaining({ status: 'succeeded', output: { ms: 1 } }),
        outputDiff: { path: 'ms', recorded: 25, replay: 1 },
      },
    ]);
    const makespanMs = example('code-edit-hazards').result.endMs;
    expect(report.recordings[1]).toMatchObject({
      ok: true,
      runId: 'run_example_code_edit',
      recorded: { status: 'succeeded', makespanMs },
      divergences: [],
    });
  });

  it('a deep output change names the first JSON path where the outputs part', async () => {
    const rec = example('flaky-search-retries');
    const last = rec.attempts.filter((a) => a.callId === 's2' && a.ok)[0] as Recording['attempts'][number];
    const output = structuredClone(last.output) as { hits: string[] };
    output.hits[1] = 'https://example.com/moved';
    last.output = output;
    const r = await replay(save('deep-output', rec));
    expect(r.code).toBe(1);
    expect(r.out).toContain(
      'output first differs at hits[1]: recorded "https://example.com/tokio%20vs%20async-std/2", replay "https://example.com/moved"',
    );
  });

  it('--junit writes one testcase per recording, a failure carrying the diff', async () => {
    const rec = example('replan-after-404');
    (rec.attempts.find((a) => a.callId === 'faq') as Recording['attempts'][number]).output = { title: '<changed> & "quoted"' };
    const bad = save('junit-bad', rec);
    const xmlFile = path.join(dir, 'replay.xml');
    const r = await replay(bad, path.join(EXAMPLES, 'deploy-approval.json'), '--junit', xmlFile);
    expect(r.code).toBe(1);
    const xml = readFileSync(xmlFile, 'utf8');
    expect(xml).toMatch(/^<\?xml version="1.0" encoding="UTF-8"\?>\n<testsuites name="toolgraph replay" tests="2" failures="1" errors="0"/);
    expect(xml.match(/<testcase /g)).toHaveLength(2);
    expect(xml).toContain(`<testcase classname="toolgraph.replay" name="${bad}"`);
    expect(xml).toContain('<failure type="divergence" message="');
    expect(xml).toContain('- call faq (fetch_page): differs in output');
    expect(xml).toContain('&lt;changed&gt; &amp; \\&quot;quoted\\&quot;');
    expect(xml).toMatch(/<testcase classname="toolgraph.replay" name="[^"]*deploy-approval.json" time="[\d.]+"\/>/);
  });

  it('--tolerance widens what counts as simultaneous', async () => {
    const cfg = config('global-1b', (y) => y.replace(/^ {2}global: 8$/m, '  global: 1'));
    const strict = await replay(path.join(EXAMPLES, 'code-edit-hazards.json'), '--config', cfg, '--tolerance', '0');
    const loose = await replay(path.join(EXAMPLES, 'code-edit-hazards.json'), '--config', cfg, '--tolerance', '1000');
    expect(strict.out).toContain('order of starts');
    expect(loose.out).not.toContain('order of starts');
    expect(loose.code).toBe(0);
  });
});
