/**
 * The dashboard's words for flow control (DESIGN §4), from its own modules (the pure parts): a call
 * waiting for a keyed limit ("waiting for repo acme (2 of 2) held by …"), a paused tool ("paused until
 * 12:04:05 by a 429 from api"), the Limits page's busy keys and paused tools, the run's priority, and
 * the "Needs attention" of calls whose outcome is unknown. Shapes as the server sends them; a server
 * without the new kinds or fields still renders as before.
 */
import { describe, expect, it } from 'vitest';

// Plain JavaScript modules of the dashboard (type-checked by tsconfig.dashboard.json), loaded by path
// so that this project's type check leaves them to that one.
const load = (path: string) => import(path) as Promise<any>;
const waiting = await load('../../src/dashboard/static/waiting.js');
const limits = await load('../../src/dashboard/static/pages/limits.js');
const alerts = await load('../../src/dashboard/static/panels/alerts.js');
const attention = await load('../../src/dashboard/static/pages/attention.js');
const run = await load('../../src/dashboard/static/pages/run.js');

const strip = (html: string) =>
  html
    .replace(/<[^>]+>/g, '')
    .replace(/\s+/g, ' ')
    .trim();
const at = (h: number, m: number, s: number) => new Date(2026, 11, 5, h, m, s).getTime();

describe('waiting words', () => {
  const keyWait = {
    kind: 'key',
    key: 'repo:acme',
    pattern: 'repo:*',
    limit: 2,
    inUse: 2,
    holders: [
      { runId: 'run_1', callId: 'a', tenant: 't', since: new Date(at(12, 0, 0)).toISOString() },
      { runId: 'run_2', callId: 'b', tenant: 't', since: new Date(at(12, 0, 1)).toISOString() },
    ],
  };
  const backoff = { kind: 'backoff', key: 'api', tool: 'api', until: new Date(at(12, 4, 5)).toISOString(), holders: [] };

  it('a keyed limit: "waiting for repo acme (2 of 2) held by …", with links to the holders', () => {
    const html = waiting.waitsHtml([keyWait], at(12, 0, 3));
    expect(strip(html)).toBe('waiting for repo acme (2 of 2) held by run run_1 / call a for 3.00 s, run run_2 / call b for 2.00 s');
    expect(html).toContain('href="#/runs/run_1?call=a"');
    expect(waiting.waitsText([keyWait])).toBe('waiting for repo acme (2 of 2)');
    expect(waiting.shortWait(keyWait)).toBe('repo acme');
  });

  it("a tool's keyed concurrency names the tool and its key", () => {
    const w = { ...keyWait, key: 'acme/web', pattern: '{owner}/{repo}', tool: 'deploy', limit: 1, inUse: 1, holders: [] };
    expect(waiting.waitsText([w])).toBe('waiting for deploy acme/web (1 of 1)');
  });

  it('a backoff: "paused until 12:04:05 by a 429 from api" (status when given)', () => {
    expect(waiting.waitsText([{ ...backoff, status: 429 }])).toBe('paused until 12:04:05 by a 429 from api');
    expect(strip(waiting.waitsHtml([{ ...backoff, status: 429 }], at(12, 4, 0)))).toBe('paused until 12:04:05 by a 429 from api');
    expect(waiting.waitsText([backoff])).toBe('paused until 12:04:05 by backpressure from api');
    expect(waiting.pausedText({ tool: 'api', until: at(12, 4, 5), status: 503 })).toBe('paused until 12:04:05 by a 503 from api');
  });

  it('a backoff and a limit together: the pause first, then what else it waits for', () => {
    const tool = { kind: 'tool', key: 'api', limit: 1, inUse: 1, holders: [] };
    expect(waiting.waitsText([tool, { ...backoff, status: 429 }])).toBe(
      'paused until 12:04:05 by a 429 from api; waiting for tool limit api (1 of 1 in use)',
    );
  });

  it('a limit with room kept for a more urgent waiter (queuedBehind on a counted limit) says for whom', () => {
    const kept = {
      kind: 'tool',
      key: 'one',
      limit: 2,
      inUse: 1,
      holders: [{ runId: 'run_1', callId: 'a', tenant: 't', since: new Date(at(12, 0, 0)).toISOString() }],
      queuedBehind: [{ runId: 'run_9', callId: 'u', tenant: 't', since: new Date(at(12, 0, 1)).toISOString() }],
    };
    const html = waiting.waitsHtml([kept], at(12, 0, 3));
    expect(strip(html)).toBe(
      'waiting for tool limit one (1 of 2 in use) held by run run_1 / call a for 3.00 s; the free place is kept for run run_9 / call u, more urgent',
    );
    expect(html).toContain('href="#/runs/run_9?call=u"');
    const lock = { kind: 'lock', key: 'file:/x', holders: [], queuedBehind: kept.queuedBehind };
    expect(strip(waiting.waitsHtml([lock], at(12, 0, 3)))).toBe(
      'waiting for lock file:/x, queued behind run run_9 / call u, which asked first',
    );
  });

  it('the kinds of before read as before', () => {
    expect(waiting.waitsText([{ kind: 'lock', key: 'file:/x', holders: [] }])).toBe('waiting for lock file:/x');
  });
});

describe('the Limits page', () => {
  it('lists busy keys, the fullest first, and paused tools', () => {
    const rows = limits.keysHtml([
      { pattern: 'repo:*', key: 'repo:web', limit: 2, inUse: 1 },
      { pattern: 'repo:*', key: 'repo:acme', limit: 2, inUse: 2 },
      { pattern: '{owner}/{repo}', tool: 'deploy', key: 'acme/web', limit: 1, inUse: 1 },
    ]);
    expect(rows.match(/data-key="([^"]+)"/g)).toEqual(['data-key="acme/web"', 'data-key="repo:acme"', 'data-key="repo:web"']);
    expect(strip(rows)).toContain('repo:acme repo:* 2 of 2');
    expect(strip(rows)).toContain('acme/web of deploy {owner}/{repo} 1 of 1');
    const paused = limits.pausedHtml([{ tool: 'api', until: new Date(at(12, 4, 5)).toISOString(), status: 429 }]);
    expect(strip(paused)).toBe('api paused until 12:04:05 by a 429 from api');
    expect(limits.keysHtml([])).toBe('');
  });
});

describe('priority and needs attention', () => {
  it("shows a run's priority when the server gives one, nothing otherwise", () => {
    expect(strip(run.priorityHtml({ priority: 1 }))).toBe('Priority1 (most urgent)');
    expect(strip(run.priorityHtml({ priority: 5 }))).toBe('Priority5 (background)');
    expect(run.priorityHtml({})).toBe('');
  });

  it('lists calls whose outcome is unknown, and counts them as a reason the run needs attention', () => {
    const calls = [
      { id: 'mail', tool: 'send_mail', status: 'failed', error: { code: 'outcome_unknown', message: 'm', details: { cause: 'timeout' } } },
      { id: 'page', tool: 'read_page', status: 'failed', error: { code: 'timeout', message: 't' } },
      { id: 'ok', tool: 'echo', status: 'succeeded', error: null },
    ];
    expect(alerts.outcomeUnknown(calls).map((c: { id: string }) => c.id)).toEqual(['mail']);
    expect(alerts.causeText({ cause: 'timeout' })).toBe('timed out');
    expect(alerts.causeText({ cause: 'interrupted' })).toBe('its replica or process stopped');
    const row = attention.summarize({
      id: 'run_1',
      tenant: 't',
      status: 'partial',
      failure: 'partial',
      tags: {},
      createdAt: '2026-12-05T12:00:00.000Z',
      endedAt: '2026-12-05T12:00:01.000Z',
      calls,
      diagnostics: [],
    });
    expect(row.outcomeUnknown).toBe(1);
    expect(attention.attentionReasons(row, new Map())).toContainEqual(['failed', '1 outcome unknown']);
  });
});
