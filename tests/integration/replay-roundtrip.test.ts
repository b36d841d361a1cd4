// Round trips (DESIGN §8, §9): real runs on the live Engine (real executors and clock; an http tool on
// a local test server for real retries), recorded with recordingOf, replay on the virtual clock with
// exit 0 — for retries, reviews (approve, edit, reject), chained replans, a cancel and fail-fast
// compensations. Plus the committed examples, freshly generated ones, `toolgraph run --record`, and
// one real child process `node bin/toolgraph.mjs replay examples/recordings`.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/types.js';
import { EXAMPLE_CONFIG, EXAMPLES, exampleConfig, generateExamples, startToolServer } from '../../scripts/example-recordings.js';
import { recordLive, type LiveBatch, type LiveScript } from '../../scripts/record-live.js';
import type { Recording } from '../../src/contract/recording.js';
import { runCli } from '../helpers/cli.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-replay-rt-'));

const replay = (...args: string[]) => runCli(['replay', ...args]);

let server: Awaited<ReturnType<typeof startToolServer>>;
let config: Config;

beforeAll(async () => {
  server = await startToolServer(0);
  config = exampleConfig(server.port);
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
});

async function roundTrip(name: string, batch: LiveBatch, script?: LiveScript): Promise<Recording> {
  const { recording } = await recordLive(config, batch, script);
  const file = path.join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(recording, null, 2));
  const r = await replay(file);
  expect(r.err).toBe('');
  expect(r.out).toContain(`MATCH    ${file}`);
  expect(r.code).toBe(0);
  return recording;
}

describe('a real run, recorded, replays with exit 0', () => {
  it('with retries (503, then 429 with Retry-After) that succeed, and one that runs out of attempts', async () => {
    const rec = await roundTrip('retries', {
      calls: [
        { id: 's1', tool: 'web_search', args: { q: 'rust async runtimes' } },
        { id: 'down', tool: 'web_search', args: { q: 'site is down' } },
        { id: 'sum', tool: 'summarize', args: { from: '${s1.output.hits}' } },
      ],
    });
    expect(rec.attempts.filter((a) => a.callId === 's1').map((a) => a.ok)).toEqual([false, false, true]);
    expect(rec.attempts.filter((a) => a.callId === 'down')).toHaveLength(4);
    expect(rec.attempts.find((a) => a.callId === 's1' && a.attempt === 2)).toMatchObject({ retryable: true, retryAfterMs: 0 });
    expect(rec.result.status).toBe('partial');
  });

  it('with reviews approved, edited and rejected at their recorded times', async () => {
    const decisions = {
      d_web: { decision: 'approve', delayMs: 15 },
      d_api: { decision: 'edit', args: { env: 'staging', name: 'api' }, comment: 'staging first', delayMs: 30 },
      d_db: { decision: 'reject', comment: 'not today', delayMs: 5 },
    } as const;
    const rec = await roundTrip(
      'reviews',
      {
        calls: [
          { id: 'tests', tool: 'run_tests', args: { ms: 20 } },
          { id: 'd_web', tool: 'deploy', args: { env: 'prod', name: 'web' } },
          { id: 'd_api', tool: 'deploy', args: { env: 'prod', name: 'api' } },
          { id: 'd_db', tool: 'deploy', args: { env: 'prod', name: 'db' } },
          { id: 'tell', tool: 'notify', args: { api: '${d_api.output}' } },
        ],
      },
      { review: (callId) => decisions[callId as keyof typeof decisions] },
    );
    expect(rec.reviews.map((r) => [r.callId, r.decision]).sort()).toEqual([
      ['d_api', 'edit'],
      ['d_db', 'reject'],
      ['d_web', 'approve'],
    ]);
    expect(rec.result.calls.find((c) => c.id === 'tell')?.output).toEqual({ api: { env: 'staging', name: 'api' } });
    expect(rec.result.calls.find((c) => c.id === 'd_db')?.error?.code).toBe('review_rejected');
  });

  it('with two replans in a row (the first replan fails too)', async () => {
    const rec = await roundTrip(
      'replans',
      {
        failure: 'replan',
        calls: [
          { id: 'page', tool: 'fetch_page', args: { url: 'https://docs.example.com/broken/a' } },
          { id: 'faq', tool: 'fetch_page', args: { url: 'https://docs.example.com/faq' } },
          { id: 'digest', tool: 'summarize', args: { a: '${page.output.title}' } },
        ],
      },
      {
        replans: [
          {
            delayMs: 10,
            calls: [
              { id: 'page2', tool: 'fetch_page', args: { url: 'https://old.example.com/broken/a' } },
              { id: 'digest2', tool: 'summarize', args: { a: '${page2.output}' } },
            ],
          },
          {
            delayMs: 25,
            calls: [
              { id: 'page3', tool: 'fetch_page', args: { url: 'https://mirror.example.org/a' } },
              { id: 'digest3', tool: 'summarize', args: { a: '${page3.output.title}', faq: '${faq.output}' } },
            ],
          },
        ],
      },
    );
    expect(rec.replans).toHaveLength(2);
    expect(rec.result.status).toBe('succeeded');
    expect(rec.result.calls.filter((c) => c.status === 'cancelled').map((c) => c.error?.code)).toEqual(['superseded', 'superseded']);
  });

  it('with a cancel while attempts run', async () => {
    const rec = await roundTrip(
      'cancel',
      {
        calls: [
          { id: 'quick', tool: 'build_image', args: { name: 'web', ms: 10 } },
          { id: 'slow', tool: 'build_image', args: { name: 'api', ms: 500 } },
          { id: 'after_quick', tool: 'typecheck', args: { ms: 500 } },
          { id: 'queued', tool: 'build_image', args: { name: 'worker', ms: 500 } },
          { id: 'later', tool: 'notify', args: { x: '${slow.output}' } },
        ],
      },
      { cancelAfterMs: 60 },
    );
    expect(rec.cancelledAtMs).toBeGreaterThanOrEqual(60);
    expect(rec.result.status).toBe('cancelled');
    expect(rec.result.calls.map((c) => c.status)).toEqual(['succeeded', 'cancelled', 'cancelled', 'cancelled', 'cancelled']);
  });

  it('with a fail-fast failure that aborts a running call and compensates, newest first', async () => {
    const rec = await roundTrip(
      'fail-fast',
      {
        calls: [
          { id: 'branch', tool: 'create_branch', args: { name: 'fix-9' } },
          { id: 'ship', tool: 'deploy', args: { env: 'prod', name: 'web' } },
          { id: 'long', tool: 'sleep', args: { ms: 400 } },
          { id: 'tests', tool: 'run_tests', args: { ms: 40 } },
          { id: 'push', tool: 'shell', args: { cmd: 'git push ${branch.output.name}', message: 'rejected' } },
        ],
      },
      { review: () => ({ decision: 'approve', delayMs: 10 }) },
    );
    expect(rec.result.status).toBe('failed');
    const comps = rec.attempts.filter((a) => a.compensation);
    expect(comps.map((a) => a.callId)).toEqual(['ship', 'branch']);
    expect(rec.result.calls.find((c) => c.id === 'long')?.status).toBe('cancelled');
  });
});

describe('the example recordings', () => {
  it('all replay with exit 0, with a summary table', async () => {
    const r = await replay(path.join(ROOT, 'examples/recordings'));
    expect(r.code).toBe(0);
    for (const ex of EXAMPLES) expect(r.out).toMatch(new RegExp(`MATCH +\\S*${ex.name}\\.json`));
    expect(r.out).toMatch(/RECORDING +RUN +STATUS +CALLS +MAKESPAN \(ms\) +RESULT/);
    expect(r.out).toContain(`${EXAMPLES.length} recordings: ${EXAMPLES.length} match, 0 diverged, 0 unreadable`);
  });

  it('on a terminal, a corpus shows a progress bar on stderr, cleared at the end', async () => {
    const c = await runCli(['replay', path.join(ROOT, 'examples/recordings')], true);
    expect(c.code).toBe(0);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the progress bar's terminal escapes
    expect(c.err).toMatch(/^\r\x1b\[K\[\.{30}\] 0\/\d+ \S+\.json/);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the progress bar's terminal escapes
    expect(c.err).toMatch(/\r\x1b\[K\[#+\.*\] \d+\/\d+ \S+\.json\r\x1b\[K$/);
  });

  it('freshly generated through the real Engine replay with exit 0 too', async () => {
    const out = path.join(dir, 'fresh');
    const files = await generateExamples(out);
    expect(files).toHaveLength(EXAMPLES.length);
    const r = await replay(out, '--json');
    expect(JSON.parse(r.out).summary).toEqual({ recordings: EXAMPLES.length, match: EXAMPLES.length, diverged: 0, unreadable: 0 });
    expect(r.code).toBe(0);
  });

  it('`toolgraph run --record` writes a recording that replays with exit 0', async () => {
    const batch = path.join(dir, 'batch.json');
    const rec = path.join(dir, 'run-record.json');
    const calls = [
      { id: 'a', tool: 'read_file', args: { path: '/r/a' } },
      { id: 'w', tool: 'write_file', args: { path: '/r/a', content: '${a.output.path}' } },
      { id: 't', tool: 'run_tests', args: { ms: 15 } },
      { id: 'd', tool: 'deploy', args: { env: 'dev', name: 'web' } },
    ];
    writeFileSync(batch, JSON.stringify({ calls }));
    expect((await runCli(['run', batch, '--config', EXAMPLE_CONFIG, '--record', rec, '--approve'])).code).toBe(0);
    expect(JSON.parse(readFileSync(rec, 'utf8'))).toMatchObject({
      format: 'toolgraph.recording/v1',
      reviews: [{ callId: 'd', decision: 'approve' }],
    });
    const r = await replay(rec);
    expect(r.code).toBe(0);
  });

  it('replay through a real child process: node bin/toolgraph.mjs replay examples/recordings', () => {
    const p = spawnSync(process.execPath, ['bin/toolgraph.mjs', 'replay', 'examples/recordings'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(p.stderr).toBe('');
    expect(p.stdout).toContain(`${EXAMPLES.length} match, 0 diverged`);
    expect(p.status).toBe(0);
  });
});
