/**
 * The coordination logic of cluster-wide permits (cluster/permit-plan.ts), without a database: what a
 * call claims (counter keys with capacities, lock nodes of its keys and their ancestors), and how an
 * ask is decided over the rows it locked: in order, all or nothing per call, limits never exceeded and
 * reached, reader–writer locks meeting on one row whatever the depth of the keys, a run never waiting
 * for itself, and the ask's lock waiters served first come, first served. A property test checks the
 * lock decisions against the core limiter's (`clash`) on random keys. Across asks, a lock waiter's marks
 * keep later conflicting calls behind it (first come, first served), until it starts or stops asking.
 * A counter's most urgent waiter (priority with aging, then readiness) keeps the counter's last place
 * across asks (permit-priority.ts).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import {
  claimOf,
  countEntries,
  decide,
  lockPath,
  rowsToLock,
  sharedLimits,
  SEP,
  type AskRows,
  type Claim,
  type Rates,
} from '../../src/cluster/permit-plan.js';
import { CounterQueue, type CounterMark } from '../../src/cluster/permit-priority.js';
import { LockQueue, type NodeMarks } from '../../src/cluster/permit-waits.js';
import { clash } from '../../src/core/limits.js';
import { key } from '../../src/core/resources.js';
import type { PermitRequest } from '../../src/core/scheduler.js';

const config = parseConfig(
  `
tools:
  - name: t
    executor: { kind: builtin, name: echo }
limits:
  global: 3
  perRun: 2
  tool: { t: 2 }
  tenant: { default: 3, small: 1 }
  resource: { "svc:*": 1 }
`,
  'test',
);
const limits = sharedLimits(config.limits);
const NO_LIMITS = { tenant: {}, tool: {}, resource: {}, rate: { tenant: {} }, maxCallsPerRun: 1000 };
const NO_RATES: Rates = { check: () => ({ ok: true }), take: () => {} };

const req = (runId: string, o: Partial<PermitRequest> = {}): PermitRequest => ({
  runId,
  callId: 'c',
  tenant: 'x',
  tool: 'other',
  domain: null,
  reads: [],
  writes: [],
  ...o,
});
const claim = (r: PermitRequest) => claimOf(r, limits, config.catalog);
const empty = (): AskRows => ({ counters: new Map(), nodes: new Map() });
const granted = (claims: Claim[], rows = empty(), mine?: Map<string, string[]>) =>
  decide(claims, rows, NO_RATES, mine).decisions.map((d) => (d.granted ? 'yes' : d.reason));

describe('what a call claims', () => {
  it('counters for its tenant, tool and overlapping resource limits, with their capacities; global and perRun stay per replica', () => {
    const c = claim(req('r', { tenant: 'small', tool: 't', writes: ['svc:db'] }));
    expect(c.counters.map((k) => [k.key, k.cap])).toEqual([
      ['tenant:small', 1],
      ['tool:t', 2],
      ['resource:svc:*', 1],
    ]);
    expect(claim(req('r')).counters.map((k) => k.key)).toEqual(['tenant:x']);
    expect(limits.global).toBeUndefined();
    expect(limits.perRun).toBeUndefined();
  });

  it('a lock node per key and intention entries on each ancestor; a wildcard locks at its parent', () => {
    expect(lockPath(key('file:/repo/src/a.ts'))).toEqual(['', 'file', 'file/repo', 'file/repo/src', 'file/repo/src/a.ts']);
    expect(lockPath(key('file:*'))).toEqual(['', 'file']);
    expect(lockPath(key('*'))).toEqual(['']);
    const c = claim(req('r', { domain: 'tenant:x', writes: ['file:/repo/src'], reads: ['file:/repo/src/a.ts'] }));
    const d = `tenant:x${SEP}`;
    expect(c.lockEntries).toEqual([
      `${d}file/repo/src${SEP}w`,
      `${d}${SEP}iw`,
      `${d}file${SEP}iw`,
      `${d}file/repo${SEP}iw`,
      `${d}file/repo/src/a.ts${SEP}r`,
      `${d}${SEP}ir`,
      `${d}file${SEP}ir`,
      `${d}file/repo${SEP}ir`,
      `${d}file/repo/src${SEP}ir`,
    ]);
    // A run-scoped tool takes no lock.
    expect(claim(req('r', { writes: ['file:/a'] })).lockEntries).toEqual([]);
  });

  it('the rows to lock are each named once and sorted', () => {
    const claims = [
      claim(req('a', { tool: 't', domain: 'global', writes: ['b:/x'] })),
      claim(req('b', { tool: 't', domain: 'global', reads: ['a:/y'] })),
    ];
    const rows = rowsToLock(claims);
    expect(rows.counters).toEqual([
      { key: 'tenant:x', cap: 3 },
      { key: 'tool:t', cap: 2 },
    ]);
    expect(rows.nodes).toEqual([`global${SEP}`, `global${SEP}a`, `global${SEP}a/y`, `global${SEP}b`, `global${SEP}b/x`]);
  });
});

describe('deciding an ask', () => {
  it('counters: never exceeded and reached, in order, all or nothing per call; what is held elsewhere counts', () => {
    const rows = empty();
    rows.counters.set('tool:t', 1);
    const claims = ['a', 'b', 'c'].map((r) => claim(req(r, { tool: 't' })));
    const out = decide(claims, rows, NO_RATES);
    expect(out.decisions.map((d) => (d.granted ? 'yes' : d.reason))).toEqual(['yes', 'tool', 'tool']);
    expect(out.decisions[1]).toMatchObject({ counter: { key: 'tool:t', cap: 2 }, inUse: 2 });
    // The refused calls took nothing: only the granted call's increments are written.
    expect(out.counterDelta).toEqual(
      new Map([
        ['tenant:x', 1],
        ['tool:t', 1],
      ]),
    );
    // A call refused by its second counter takes nothing from the first.
    const small = decide(
      [claim(req('s', { tenant: 'small', tool: 't' }))],
      { counters: new Map([['tool:t', 2]]), nodes: new Map() },
      NO_RATES,
    );
    expect(small.counterDelta.size).toBe(0);
  });

  it('a write of a directory and a read below it meet on one row; disjoint keys do not', () => {
    const domain = 'tenant:x';
    const w = claim(req('w', { domain, writes: ['file:/repo/src'] }));
    expect(granted([w, claim(req('r', { domain, reads: ['file:/repo/src/a.ts'] }))])).toEqual(['yes', 'lock']);
    expect(granted([claim(req('r', { domain, reads: ['file:/repo/src/a.ts'] })), w])).toEqual(['yes', 'lock']);
    expect(
      granted([w, claim(req('o', { domain, writes: ['file:/repo/srcx'] })), claim(req('p', { domain, reads: ['file:/repo'] }))]),
    ).toEqual(['yes', 'yes', 'lock']);
    // Readers share; a wildcard write conflicts with everything below its parent.
    expect(granted([claim(req('a', { domain, reads: ['file:/a'] })), claim(req('b', { domain, reads: ['file:/a'] }))])).toEqual([
      'yes',
      'yes',
    ]);
    expect(granted([claim(req('a', { domain, reads: ['file:/a/b'] })), claim(req('b', { domain, writes: ['file:*'] }))])).toEqual([
      'yes',
      'lock',
    ]);
    // Another domain is another tree.
    expect(granted([w, claim(req('y', { domain: 'tenant:y', writes: ['file:/repo/src'] }))])).toEqual(['yes', 'yes']);
  });

  it('a run never waits for its own calls: what it holds is read when a lock looks taken, and taken off', () => {
    const domain = 'global';
    const held = claim(req('r1', { callId: 'held', domain, writes: ['file:/a'] }));
    const rows: AskRows = { counters: new Map(), nodes: countEntries(held.lockEntries) };
    const ask = [claim(req('r1', { callId: 'next', domain, reads: ['file:/a'] })), claim(req('r2', { domain, reads: ['file:/a'] }))];
    const first = decide(ask, { counters: new Map(), nodes: countEntries(held.lockEntries) }, NO_RATES);
    expect(first.needMine).toEqual(new Set(['r1', 'r2']));
    expect(
      granted(
        ask,
        rows,
        new Map([
          ['r1', held.lockEntries],
          ['r2', []],
        ]),
      ),
    ).toEqual(['yes', 'lock']);
  });

  it('waiters of the ask are served first come, first served: a later call of another run that conflicts with one waits behind it', () => {
    const domain = 'tenant:x';
    const claims = [
      claim(req('w1', { domain, writes: ['file:/a'] })),
      claim(req('rd', { domain, reads: ['file:*'] })),
      claim(req('w3', { domain, writes: ['file:/b'] })),
      claim(req('rd', { callId: 'd', domain, writes: ['file:/c'] })),
    ];
    const out = decide(claims, empty(), NO_RATES);
    expect(out.decisions).toEqual([
      { granted: true },
      { granted: false, reason: 'lock', behindWaiter: false },
      { granted: false, reason: 'lock', behindWaiter: true },
      // The waiter's own run does not wait behind it.
      { granted: true },
    ]);
  });

  it('rates are asked only for rated calls, after the counters, and a token is taken only on a grant', () => {
    const asked: string[] = [];
    const taken: string[] = [];
    const rates: Rates = {
      check: (h) => {
        asked.push(h.runId);
        return h.runId === 'b' ? { ok: false, wakeAt: 5 } : { ok: true };
      },
      take: (h) => void taken.push(h.runId),
    };
    const rated = (r: string) => ({ ...claim(req(r)), rated: true });
    const out = decide([rated('a'), rated('b'), claim(req('c', { tenant: 'small' }))], empty(), rates);
    expect(out.decisions.map((d) => (d.granted ? 'yes' : d.reason))).toEqual(['yes', 'rate', 'yes']);
    expect(asked).toEqual(['a', 'b']);
    expect(taken).toEqual(['a']);
  });

  it('lock decisions agree with the core limiter on keys without wildcards (any order of any reads and writes)', () => {
    const seg = fc.constantFrom('a', 'b', 'c');
    const keyArb = fc.array(seg, { minLength: 1, maxLength: 3 }).map((s) => `f:/${s.join('/')}`);
    const call = fc.record({
      run: fc.constantFrom('r1', 'r2', 'r3'),
      reads: fc.array(keyArb, { maxLength: 2 }),
      writes: fc.array(keyArb, { maxLength: 2 }),
    });
    fc.assert(
      fc.property(fc.array(call, { minLength: 1, maxLength: 6 }), (calls) => {
        const claims = calls.map((c, i) =>
          claimOf(req(c.run, { callId: `c${i}`, domain: 'global', reads: c.reads, writes: c.writes }), NO_LIMITS, config.catalog),
        );
        const runs = new Map(calls.map((c) => [c.run, [] as string[]]));
        const got = decide(claims, empty(), NO_RATES, runs).decisions.map((d) => d.granted);
        // The core's rule: a call waits when it clashes with a granted call or an earlier waiter.
        const held: Claim[] = [];
        const waiting: Claim[] = [];
        const want = claims.map((c) => {
          const blocked = held.some((h) => clash(c.holder, h.holder)) || waiting.some((w) => clash(c.holder, w.holder));
          (blocked ? waiting : held).push(c);
          return !blocked;
        });
        expect(got).toEqual(want);
      }),
      { numRuns: 500 },
    );
  });
});

describe('first come, first served across asks (permit-waits.ts)', () => {
  const domain = 'tenant:x';
  /** Asks at `now`, the held locks of `held` counted, the marks and places in line kept between asks. */
  function asker() {
    const marks = new Map<string, NodeMarks>();
    const since = new Map<string, number>();
    let nodes = new Map<string, { r: number; w: number; ir: number; iw: number }>();
    return {
      hold(c: Claim) {
        nodes = countEntries(c.lockEntries, nodes);
      },
      free(c: Claim) {
        nodes = countEntries(c.lockEntries, nodes, -1);
      },
      ask(now: number, claims: Claim[], ttlMs = 3000) {
        const queue = new LockQueue(marks, now, ttlMs, since);
        const rows: AskRows = { counters: new Map(), nodes: new Map([...nodes].map(([k, v]) => [k, { ...v }])) };
        const out = decide(claims, rows, NO_RATES, new Map(claims.map((c) => [c.request.runId, []])), queue);
        claims.forEach((c, i) => {
          if (out.decisions[i]?.granted) nodes = countEntries(c.lockEntries, nodes);
        });
        return out.decisions.map((d) => (d.granted ? 'yes' : d.reason === 'lock' && d.behind ? `behind ${d.behind.run}` : d.reason));
      },
    };
  }

  it('a writer that waits for a reader is not passed by later readers, in later asks; it starts once the reader ends', () => {
    const a = asker();
    const r1 = claim(req('r1', { domain, reads: ['file:/x'] }));
    const w = claim(req('w', { domain, writes: ['file:/x'] }));
    const r2 = claim(req('r2', { domain, reads: ['file:/x/a.ts'] }));
    expect(a.ask(0, [r1])).toEqual(['yes']);
    expect(a.ask(10, [w])).toEqual(['lock']);
    // Without the writer's mark the read would share with r1's.
    expect(a.ask(20, [r2])).toEqual(['behind w']);
    a.free(r1);
    expect(a.ask(30, [r2, w])).toEqual(['behind w', 'yes']);
    // Granted: its marks went; now r2 waits for the running write, and is the oldest waiter.
    expect(a.ask(40, [r2])).toEqual(['lock']);
  });

  it('the oldest waiter is never made to wait by a younger one; a mark lapses when its waiter stops asking', () => {
    const a = asker();
    const held = claim(req('h', { domain, writes: ['file:/x'] }));
    a.hold(held);
    const old = claim(req('old', { domain, reads: ['file:/x'] }));
    const young = claim(req('young', { domain, writes: ['file:/x/y'] }));
    expect(a.ask(0, [old])).toEqual(['lock']);
    // Refused by the running write first; it waits too, younger.
    expect(a.ask(5, [young])).toEqual(['lock']);
    a.free(held);
    // Asked together, younger first: the older still goes, the younger waits behind it.
    expect(a.ask(10, [young, old])).toEqual(['behind old', 'yes']);
    // A waiter that went away (never asks again) holds nobody back past its mark's time.
    const b = asker();
    b.hold(held);
    const gone = claim(req('gone', { domain, writes: ['file:/z'] }));
    b.hold(claim(req('h2', { domain, reads: ['file:/z'] })));
    expect(b.ask(0, [gone], 3000)).toEqual(['lock']);
    const reader = claim(req('reader', { domain, reads: ['file:/z'] }));
    expect(b.ask(2999, [reader])).toEqual(['behind gone']);
    expect(b.ask(3000, [reader])).toEqual(['yes']);
  });

  it('a more urgent waiter goes before older ones of a less urgent run (priority), and waits behind more urgent ones', () => {
    const a = asker();
    const held = claim(req('h', { domain, writes: ['file:/x'] }));
    a.hold(held);
    const background = claim(req('bg', { domain, reads: ['file:/x'], priority: 5 }));
    const urgent = claim(req('urgent', { domain, writes: ['file:/x/y'], priority: 1 }));
    const later = claim(req('later', { domain, reads: ['file:/x'], priority: 3 }));
    expect(a.ask(0, [background])).toEqual(['lock']);
    expect(a.ask(5, [urgent])).toEqual(['lock']);
    expect(a.ask(6, [later])).toEqual(['lock']);
    a.free(held);
    // The background reader asks first: it waits behind the urgent writer, though it waited longer.
    expect(a.ask(10, [background, later])).toEqual(['behind urgent', 'behind urgent']);
    expect(a.ask(11, [urgent])).toEqual(['yes']);
  });

  it('a run never waits behind its own waiting call', () => {
    const a = asker();
    a.hold(claim(req('h', { domain, reads: ['file:/x'] })));
    expect(a.ask(0, [claim(req('r', { domain, writes: ['file:/x'] }))])).toEqual(['lock']);
    expect(a.ask(1, [claim(req('r', { callId: 'd', domain, reads: ['file:/x'] }))])).toEqual(['yes']);
  });
});

describe('keyed limits (DESIGN §4): one counter per key', () => {
  const keyed = parseConfig(
    `
tools:
  - name: push
    concurrency: { limit: 1, per: "{owner}/{repo}" }
    executor: { kind: builtin, name: echo }
limits:
  each: { "repo:*": 2 }
`,
    'test',
  );
  const kl = sharedLimits(keyed.limits);
  const c = (runId: string, o: Partial<PermitRequest>) => claimOf(req(runId, o), kl, keyed.catalog);

  it("claims its tool's per key and each K under a pattern, cut to the pattern's length", () => {
    const a = c('r1', { tool: 'push', perKey: 'acme/web', writes: ['repo:acme/web/a.ts', 'repo:acme/api'], reads: ['repo:beta'] });
    expect(a.counters.map((k) => [k.key, k.kind, k.name, k.cap])).toEqual([
      ['key:push\u001facme/web', 'key', 'acme/web', 1],
      ['each:repo:*\u001frepo:acme', 'key', 'repo:acme', 2],
      ['each:repo:*\u001frepo:beta', 'key', 'repo:beta', 2],
    ]);
    // Without its expanded key (a request of an older replica), the tool's keyed limit is not claimed.
    expect(c('r2', { tool: 'push' }).counters).toEqual([]);
  });

  it('grants up to the capacity of each key, in order; another key is not held back', () => {
    const claims = [
      c('r1', { tool: 'push', perKey: 'acme/web' }),
      c('r2', { tool: 'push', perKey: 'acme/web' }),
      c('r3', { tool: 'push', perKey: 'acme/api' }),
    ];
    const d = decide(claims, empty(), NO_RATES);
    expect(d.decisions.map((x) => x.granted)).toEqual([true, false, true]);
    const refused = d.decisions[1];
    expect(refused).toMatchObject({ granted: false, reason: 'key', inUse: 1, counter: { name: 'acme/web', group: { tool: 'push' } } });
  });
});

describe('priority across asks (permit-priority.ts): a counter keeps places for its most urgent waiters', () => {
  /** Asks of one "database": the counter rows and their marks persist between asks, on a virtual clock. */
  function cluster(agingMs = 10_000) {
    const rows = empty();
    const marks = new Map<string, CounterMark[]>();
    let now = 1_000_000;
    return {
      ask(rs: PermitRequest[]) {
        const q = new CounterQueue(marks, now, 3000, agingMs);
        const d = decide(rs.map(claim), rows, NO_RATES, undefined, undefined, undefined, q);
        return d.decisions.map((x) => (x.granted ? 'yes' : 'behind' in x && x.behind ? `behind ${x.behind.run}` : x.reason));
      },
      release(key: string) {
        rows.counters.set(key, (rows.counters.get(key) ?? 1) - 1);
      },
      tick(ms: number) {
        now += ms;
      },
    };
  }
  // A tenant of its own per run: only the tool's counter (t: 2) is contended.
  const t = (runId: string, o: Partial<PermitRequest> = {}) => req(runId, { tool: 't', tenant: runId, ...o });

  it('an urgent call asked after less urgent ones wait gets the freed place first, whoever asks first', () => {
    const c = cluster();
    expect(c.ask([t('held1'), t('held2')])).toEqual(['yes', 'yes']); // tool t: 2, both places taken
    expect(c.ask([t('bg', { priority: 5, readyMs: 500 })])).toEqual(['tool']); // replica A's background call
    expect(c.ask([t('urgent', { priority: 1 })])).toEqual(['tool']); // replica B's urgent call, later
    c.release('tool:t');
    // A asks first when the place frees: its background call leaves it to the urgent one.
    expect(c.ask([t('bg', { priority: 5, readyMs: 600 })])).toEqual(['behind urgent']);
    expect(c.ask([t('urgent', { priority: 1, readyMs: 100 })])).toEqual(['yes']);
    // The urgent one started: its mark went. A call as urgent as the background one, ready about as
    // early, takes the place as it asks; one ready an aging period later leaves it to the background call.
    c.release('tool:t');
    expect(c.ask([t('late', { priority: 5, readyMs: 0 })])).toEqual(['yes']);
    c.tick(2500);
    expect(c.ask([t('bg', { priority: 5, readyMs: 3_100 })])).toEqual(['tool']); // asks again while it waits
    c.tick(7500);
    expect(c.ask([t('bg', { priority: 5, readyMs: 10_600 })])).toEqual(['tool']);
    c.release('tool:t');
    expect(c.ask([t('newcomer', { priority: 4 })])).toEqual(['behind bg']); // level 4, like bg's aged one, but ready 10 s later
    expect(c.ask([t('bg', { priority: 5, readyMs: 10_700 })])).toEqual(['yes']);
  });

  it('never exceeded and reached: with room for two, a less urgent call takes one place and leaves the other', () => {
    const c = cluster();
    expect(c.ask([t('h1'), t('h2')])).toEqual(['yes', 'yes']);
    expect(c.ask([t('urgent', { priority: 1 })])).toEqual(['tool']);
    c.release('tool:t');
    c.release('tool:t');
    expect(c.ask([t('bg1', { priority: 5 }), t('bg2', { priority: 5 })])).toEqual(['yes', 'behind urgent']);
    expect(c.ask([t('urgent', { priority: 1 })])).toEqual(['yes']);
    expect(c.ask([t('bg2', { priority: 5 })])).toEqual(['tool']);
  });

  it('aging: a priority-5 call that has waited 4 aging periods goes before a priority-1 call that has just come', () => {
    const c = cluster(1000);
    expect(c.ask([t('h1'), t('h2')])).toEqual(['yes', 'yes']);
    expect(c.ask([t('old', { priority: 5 })])).toEqual(['tool']);
    c.tick(2000);
    expect(c.ask([t('old', { priority: 5, readyMs: 2000 })])).toEqual(['tool']); // it asks again while it waits
    c.tick(2000);
    expect(c.ask([t('fresh', { priority: 1 })])).toEqual(['tool']); // full: it waits for the holders
    c.release('tool:t');
    expect(c.ask([t('fresh', { priority: 1 })])).toEqual(['behind old']);
    expect(c.ask([t('old', { priority: 5, readyMs: 4000 })])).toEqual(['yes']);
  });

  it('a mark lapses when its waiter stops asking; equal levels go by when the run became ready', () => {
    const c = cluster();
    expect(c.ask([t('h1'), t('h2')])).toEqual(['yes', 'yes']);
    expect(c.ask([t('gone', { priority: 1 })])).toEqual(['tool']);
    c.release('tool:t');
    expect(c.ask([t('bg', { priority: 5 })])).toEqual(['behind gone']);
    c.tick(3001);
    expect(c.ask([t('bg', { priority: 5 })])).toEqual(['yes']);
    expect(c.ask([t('young', { priority: 1, readyMs: 10 })])).toEqual(['tool']);
    expect(c.ask([t('older', { priority: 1, readyMs: 10_500 })])).toEqual(['tool']);
    expect(c.ask([t('near', { priority: 1, readyMs: 5_000 })])).toEqual(['tool']);
    c.release('tool:t');
    // Same level: ready an aging period earlier goes first; ready less than a period earlier does not.
    expect(c.ask([t('young', { priority: 1, readyMs: 20 })])).toEqual(['behind older']);
    expect(c.ask([t('near', { priority: 1, readyMs: 5_010 })])).toEqual(['yes']);
    c.release('tool:t');
    expect(c.ask([t('older', { priority: 1, readyMs: 10_510 })])).toEqual(['yes']);
  });

  it('a waiter that asks again keeps its place in line, whatever readyMs it says', () => {
    const c = cluster(500);
    expect(c.ask([t('h1'), t('h2')])).toEqual(['yes', 'yes']);
    expect(c.ask([t('first', { readyMs: 600 }), t('second')])).toEqual(['tool', 'tool']);
    c.tick(1000);
    expect(c.ask([t('first')])).toEqual(['tool']); // asks again, later, saying it has just become ready
    c.release('tool:t');
    expect(c.ask([t('second')])).toEqual(['behind first']);
    expect(c.ask([t('first')])).toEqual(['yes']);
  });
});
