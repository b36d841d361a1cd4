// A run taken over by another replica replays clean (DESIGN §8, §12, issue #30). Two `toolgraph serve`
// processes on one throwaway PostgreSQL; a run on replica 0 has calls that finished, calls running
// (idempotent and not), a call waiting for a tool limit and one awaiting review, decided through
// replica 1 (a command to the owner). Replica 0 is killed with SIGKILL; replica 1 takes the run over
// after the lease, re-runs the idempotent call, fails the other `outcome_unknown`, and finishes it. The
// recording, fetched from replica 1, marks the lost attempts and the resume, and replays with 0
// divergences through the library and `toolgraph replay FILE`.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Recording } from '../../src/contract/recording.js';
import { checkRecording } from '../../src/replay/check.js';
import { runCli } from '../helpers/cli.js';
import { startCluster, type TestCluster } from '../helpers/replicas.js';
import { until } from '../helpers/wait.js';

const LEASE_MS = 2000;

function yaml(toolUrl: string): string {
  const tool = (name: string, idempotent = true) => `
  - name: ${name}
    reads: []
    writes: []
    idempotent: ${idempotent}
    executor: { kind: http, url: "${toolUrl}/${name}" }`;
  return `
tools:${tool('quick')}${tool('slow_idem')}${tool('slow_once', false)}${tool('after')}${tool('gate')}
limits:
  tool: { quick: 1 }
  tenant: { acme: 6 }
policy:
  rules:
    - { match: { tool: gate }, review: true }
defaults:
  failure: partial
`;
}

let c: TestCluster;
const dir = mkdtempSync(path.join(tmpdir(), 'toolgraph-replay-takeover-'));

beforeAll(async () => {
  c = await startCluster(2, yaml, LEASE_MS);
}, 90_000);

afterAll(async () => {
  await c?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a run taken over after kill -9', () => {
  it('is recorded with its lost attempts and the resume, and replays with 0 divergences', async () => {
    const submitted = await c.request(0, 'POST', '/v1/runs', {
      tenant: 'acme',
      calls: [
        { id: 'q1', tool: 'quick', args: { ms: 30 } },
        { id: 'q2', tool: 'quick', args: { ms: 30 } },
        { id: 's', tool: 'slow_idem', args: { hold: true } },
        { id: 'o', tool: 'slow_once', args: { hold: true } },
        { id: 'q3', tool: 'quick', args: { hold: true } },
        { id: 'q4', tool: 'quick', args: { ms: 20 } },
        { id: 'g', tool: 'gate', args: { ms: 20 } },
        { id: 'a', tool: 'after', args: { ms: 20, from: '${s.output.callId}' } },
      ],
    });
    expect(submitted.status).toBe(201);
    const id = submitted.body.id as string;
    // q1 and q2 ran one at a time (tool limit 1); s, o and q3 run now, q4 waits for q3's slot.
    for (const call of ['s', 'o', 'q3']) await until(`${call} to run`, () => c.tools.of(id, call)[0]);
    expect(c.tools.of(id, 'q1')[0]?.end).toBeDefined();
    expect(c.tools.of(id, 'q2')[0]?.end).toBeDefined();
    // The review, decided through the replica that does not own the run.
    const review = await until('g to await review', async () => (await c.request(1, 'GET', `/v1/reviews?runId=${id}`)).body.items[0]);
    const decided = await c.request(1, 'POST', `/v1/reviews/${review.id}`, { decision: 'approve' });
    expect(decided.status, JSON.stringify(decided.body)).toBeLessThan(300);
    const status = async (call: string) =>
      (await c.request(1, 'GET', `/v1/runs/${id}`)).body.calls.find((x: { id: string }) => x.id === call)?.status;
    await until('g to succeed', async () => ((await status('g')) === 'succeeded' ? true : undefined));

    await c.replicas[0]?.kill9();
    c.replicas[0] = undefined;
    // Replica 1 takes it over: the idempotent calls run again (held again, then answered).
    await until('s to run again', () => c.tools.of(id, 's')[1], 20_000);
    await until('q3 to run again', () => c.tools.of(id, 'q3')[1], 20_000);
    c.tools.release((a) => a.runId === id);
    const ended = await c.ended(1, id, 30_000);
    expect(ended.status).toBe('partial');
    expect(ended.calls.find((x: { id: string }) => x.id === 'o').error.code).toBe('outcome_unknown');
    expect(ended.calls.find((x: { id: string }) => x.id === 'a').status).toBe('succeeded');

    const got = await c.request(1, 'GET', `/v1/runs/${id}/recording`);
    expect(got.status).toBe(200);
    const rec = got.body as Recording;
    expect(rec.resumes).toHaveLength(1);
    const resume = rec.resumes?.[0] as { atMs: number; lastMs: number };
    expect(resume.atMs - resume.lastMs).toBeGreaterThan(LEASE_MS / 2);
    const lost = rec.attempts.filter((a) => a.lost).map((a) => `${a.callId}/${a.attempt}`);
    expect(lost.sort()).toEqual(['o/1', 'q3/1', 's/1']);
    expect(rec.attempts.filter((a) => a.lost).every((a) => a.endMs === resume.atMs)).toBe(true);
    expect(rec.attempts.find((a) => a.callId === 's' && a.attempt === 2)?.startMs).toBeGreaterThanOrEqual(resume.atMs);
    expect(rec.attempts.some((a) => a.waits?.some((w) => w.kind === 'permit'))).toBe(true);

    const result = checkRecording(rec, id);
    expect(result.divergences).toEqual([]);
    expect(result.ok).toBe(true);
    // Without the takeover in it (as before #30: lost attempts dropped, no resume), it diverges.
    const { resumes: _, ...bare } = rec;
    expect(checkRecording({ ...bare, attempts: rec.attempts.filter((a) => !a.lost) }, id).ok).toBe(false);
    const file = path.join(dir, 'taken-over.json');
    writeFileSync(file, JSON.stringify(rec, null, 2));
    const cli = await runCli(['replay', file]);
    expect(cli.err, cli.err).toBe('');
    expect(cli.out).toContain(`MATCH    ${file}`);
    expect(cli.code).toBe(0);
  }, 90_000);
});
