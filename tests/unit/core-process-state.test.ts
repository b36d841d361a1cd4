/**
 * The core keeps no state between instances (DESIGN §19): the only process-wide tables are bounded memos
 * of pure functions (core/memo.ts), and two schedulers in one process, driven in lockstep, see nothing
 * of each other: each gives exactly the events it gives alone.
 */
import { describe, expect, it } from 'vitest';
import type { CallInput } from '../../src/core/calls.js';
import type { CoreEvent } from '../../src/core/events.js';
import { Memo } from '../../src/core/memo.js';
import { GLOBS, globToRegExp } from '../../src/core/policy.js';
import { KEYS, key } from '../../src/core/resources.js';
import type { Policy } from '../../src/core/tool.js';
import { rig, tool, type Rig } from '../helpers/sched.js';

const TOOLS = [
  tool('read_file', { reads: ['file:{path}'], writes: [] }),
  tool('write_file', { reads: [], writes: ['file:{path}'] }),
  tool('wipe', {}), // declares nothing: writes everything
];

function batch(prefix: string): CallInput[] {
  const calls: CallInput[] = [];
  for (let i = 0; i < 12; i++) {
    const path = `/repo/${prefix}${i % 3}`;
    const kind = i % 4 === 3 ? 'write_file' : 'read_file';
    calls.push({ id: `c${i}`, tool: kind, args: { path, ms: 5 + ((i * 7) % 11), ...(i > 4 ? { after: `\${c${i - 3}.output}` } : {}) } });
  }
  calls.push({ id: 'w', tool: 'wipe', args: { ms: 3 } });
  return calls;
}

/** Two configurations that differ where process-wide memos could mix them up: globs and templates. */
const CONFIGS: { policy: Policy; limits: { tenant: Record<string, number>; tool: Record<string, number> } }[] = [
  { policy: { rules: [{ match: { tool: 'write_*' }, after: ['read_file'] }] }, limits: { tenant: { default: 2 }, tool: {} } },
  { policy: { rules: [{ match: { tool: 'read_*' }, deny: 'no reads here' }] }, limits: { tenant: {}, tool: { write_file: 1 } } },
];

function make(n: 0 | 1, onEvent?: (e: CoreEvent) => void): Rig {
  const c = CONFIGS[n] as (typeof CONFIGS)[number];
  const r = rig({
    tools: TOOLS,
    policy: c.policy,
    limits: c.limits,
    explainWaits: true,
    ...(onEvent ? { onEvent: (e: CoreEvent) => onEvent(e) } : {}),
  });
  for (let k = 0; k < 3; k++) r.submit(k * 4, { runId: `r${n}${k}`, tenant: k === 2 ? 'other' : 'acme', calls: batch(`${n}`) });
  return r;
}

/** A run's events as comparable text. */
const text = (events: CoreEvent[]) => events.map((e) => `${e.at} ${e.type} ${e.runId}/${e.callId ?? ''} ${JSON.stringify(e.data)}`);

describe('process-wide state of the core', () => {
  it('two schedulers in one process, stepped in lockstep, each give exactly the events they give alone', () => {
    const alone = [make(0), make(1)];
    for (const r of alone) r.run();
    // B takes one step of its simulation inside each event of A, while A is in the middle of its own
    // step: any scratch state shared between instances would be overwritten under A.
    const b = make(1);
    let bDone = false;
    const a = make(0, () => {
      if (bDone) return;
      try {
        b.sim.run(1);
        bDone = true;
      } catch {
        // One step taken, more to come.
      }
    });
    a.run();
    const bDuringA = b.events.length;
    b.run();
    expect(text(a.events)).toEqual(text((alone[0] as Rig).events));
    expect(text(b.events)).toEqual(text((alone[1] as Rig).events));
    // The lockstep did interleave them, and both configs mattered (else the check proves nothing).
    expect(a.events.length).toBeGreaterThan(50);
    expect(bDuringA).toBeGreaterThan(50);
    expect(text(a.events)).not.toEqual(text(b.events));
    expect(b.events.some((e) => e.type === 'call.waiting')).toBe(true);
  });

  it('a memo stays within its bound and still answers right', () => {
    const m = new Memo<string>(100);
    for (let i = 0; i < 1000; i++) expect(m.get(`k${i}`, (k) => k.toUpperCase())).toBe(`K${i}`);
    expect(m.size).toBeLessThanOrEqual(100);
    expect(m.size).toBeGreaterThan(0);
  });

  it('the core’s memos are bounded: 60,000 distinct keys and globs leave each within its bound', () => {
    for (let i = 0; i < 60_000; i++) {
      expect(key(`file:/x/${i}`).segs).toEqual(['file', 'x', String(i)]);
      expect(globToRegExp(`t${i}*`).test(`t${i}abc`)).toBe(true);
    }
    expect(KEYS.size).toBeLessThanOrEqual(50_000);
    expect(GLOBS.size).toBeLessThanOrEqual(10_000);
  });
});
