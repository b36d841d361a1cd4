// Scheduler ordering (DESIGN §3, §4) on the virtual clock: independent calls run in parallel, data
// references and RAW/WAR/WAW hazards over file resources order calls exactly, and ready calls go by
// longest remaining path, then original index.
import { describe, expect, it } from 'vitest';
import { PURE, ends, finalStatuses, illegalMoves, rig, runStatus, starts, timeline, tool } from '../helpers/sched.js';

const tools = [
  tool('pure', PURE),
  tool('read', { reads: ['file:{path}'], writes: [] }),
  tool('write', { reads: [], writes: ['file:{path}'] }),
  tool('edit', { reads: ['file:{path}'], writes: ['file:{path}'] }),
  tool('opaque', {}), // declares neither reads nor writes: unknown effects, writes `*`
];

describe('independent calls', () => {
  it('start together at 0 in index order and end by their durations', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 'pure', args: { ms: 30 } },
        { id: 'b', tool: 'pure', args: { ms: 10 } },
        { id: 'c', tool: 'pure', args: { ms: 20 } },
      ],
    });
    r.run();
    expect(timeline(r.events)).toEqual([
      '0 run.created',
      '0 run.started',
      '0 call.ready a',
      '0 call.ready b',
      '0 call.ready c',
      '0 call.started a',
      '0 call.started b',
      '0 call.started c',
      '10 call.succeeded b',
      '20 call.succeeded c',
      '30 call.succeeded a',
      '30 run.completed',
    ]);
    expect(runStatus(r.events)).toBe('succeeded');
    expect(illegalMoves(r.events)).toEqual([]);
  });

  it('a read-only and a pure call never wait for each other, but an unknown-effects call waits for every reader', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'r', tool: 'read', args: { path: '/a', ms: 10 } },
        { id: 'p', tool: 'pure', args: { ms: 10 } },
        { id: 'o', tool: 'opaque', args: { ms: 10 } },
        { id: 'q', tool: 'read', args: { path: '/zzz', ms: 10 } },
      ],
    });
    r.run();
    // o writes `*`: WAR after r; q reads after o writes (RAW). p is pure and ignores `*`.
    expect(starts(r.events)).toEqual(['0 r', '0 p', '10 o', '20 q']);
  });
});

describe('data references', () => {
  it('a chain runs one after the other, each with the resolved output of the one before', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 'pure', args: { ms: 5, out: { v: 'x' } } },
        { id: 'b', tool: 'pure', args: { ms: 7, got: '${a.output.v}', out: { v: 'y' } } },
        { id: 'c', tool: 'pure', args: { ms: 3, got: 'from ${b.output.v}' } },
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 a', '5 b', '12 c']);
    expect(ends(r.events)).toEqual(['5 a ok', '12 b ok', '15 c ok']);
    const args = r.sim.starts.map((s) => s.start.args.got);
    expect(args).toEqual([undefined, 'x', 'from y']);
  });

  it('an output is data: text in it that looks like a reference is passed on as it is, never resolved', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        // `$${` is a literal `${` in args: a's output holds the text `${b.output}`
        { id: 'a', tool: 'pure', args: { ms: 5, out: { src: 'const s = `$${b.output}`;' } } },
        { id: 'b', tool: 'pure', args: { ms: 5 } },
        { id: 'c', tool: 'pure', args: { ms: 1, whole: '${a.output.src}', inside: 'file: ${a.output.src}' } },
      ],
    });
    r.run();
    expect(finalStatuses(r.events)).toEqual({ a: 'succeeded', b: 'succeeded', c: 'succeeded' });
    expect(r.sim.starts[2]?.start.args).toEqual({
      ms: 1,
      whole: 'const s = `${b.output}`;',
      inside: 'file: const s = `${b.output}`;',
    });
  });

  it('a fan-in waits for the slowest of its inputs', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'a', tool: 'pure', args: { ms: 40 } },
        { id: 'b', tool: 'pure', args: { ms: 10 } },
        { id: 'j', tool: 'pure', args: { x: '${a.output.id}', y: '${b.output.id}', ms: 1 } },
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 a', '0 b', '40 j']);
    expect(r.sim.starts[2]?.start.args).toEqual({ x: 'a', y: 'b', ms: 1 });
  });
});

describe('resource hazards over files', () => {
  it('RAW, WAR and WAW on one file, with an independent file beside it', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'r1', tool: 'read', args: { path: '/a', ms: 10 } },
        { id: 'r2', tool: 'read', args: { path: '/a', ms: 20 } },
        { id: 'w1', tool: 'write', args: { path: '/a', ms: 10 } }, // WAR: after r1 and r2
        { id: 'r3', tool: 'read', args: { path: '/a', ms: 10 } }, // RAW: after w1
        { id: 'w2', tool: 'write', args: { path: '/a', ms: 10 } }, // WAR after r3 (WAW after w1)
        { id: 'r4', tool: 'read', args: { path: '/b', ms: 10 } },
        { id: 'w3', tool: 'write', args: { path: '/b', ms: 5 } }, // WAR after r4
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 r1', '0 r2', '0 r4', '10 w3', '20 w1', '30 r3', '40 w2']);
    expect(ends(r.events)).toEqual(['10 r1 ok', '10 r4 ok', '15 w3 ok', '20 r2 ok', '30 w1 ok', '40 r3 ok', '50 w2 ok']);
  });

  it('WAW: two writers of one file run one after the other, in index order', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'w1', tool: 'write', args: { path: '/x', ms: 30 } },
        { id: 'w2', tool: 'write', args: { path: '/x', ms: 10 } },
        { id: 'w3', tool: 'write', args: { path: '/y', ms: 10 } },
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 w1', '0 w3', '30 w2']);
  });

  it('a directory write overlaps the files under it (segment prefix), not a sibling with a longer name', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'ra', tool: 'read', args: { path: '/repo/src/a.ts', ms: 10 } },
        { id: 'wd', tool: 'write', args: { path: '/repo/src', ms: 10 } },
        { id: 'rx', tool: 'read', args: { path: '/repo/srcx/b.ts', ms: 10 } },
        { id: 'rb', tool: 'read', args: { path: '/repo/src/b.ts', ms: 10 } },
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 ra', '0 rx', '10 wd', '20 rb']);
  });

  it('a path that is still a reference expands to file:* and waits for every writer before it', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'w', tool: 'write', args: { path: '/q', ms: 25 } },
        { id: 'p', tool: 'pure', args: { ms: 5, out: { path: '/elsewhere' } } },
        { id: 'r', tool: 'read', args: { path: '${p.output.path}', ms: 5 } },
      ],
    });
    r.run();
    // r reads file:* at plan time: RAW after w (not only after p).
    expect(starts(r.events)).toEqual(['0 w', '0 p', '25 r']);
    expect(r.sim.starts[2]?.start.args).toEqual({ path: '/elsewhere', ms: 5 });
  });

  it('a conflict edge only orders: the later call runs even when the earlier one failed', () => {
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'w1', tool: 'write', args: { path: '/x', ms: 10, fail: 'always' } },
        { id: 'w2', tool: 'write', args: { path: '/x', ms: 10 } },
      ],
    });
    r.run();
    expect(ends(r.events)).toEqual(['10 w1 failed', '20 w2 ok']);
    expect(finalStatuses(r.events)).toEqual({ w1: 'failed', w2: 'succeeded' });
    expect(runStatus(r.events)).toBe('partial');
  });

  it('a blocked writer keeps its conflict successor waiting until what it waited for has ended', () => {
    // f fails at 10 → b (needs f) is blocked at 10. b conflicted after r (slow reader, 50 ms): c (writer
    // after b) must still not overlap r, although the reduced plan has no r→c edge.
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'r', tool: 'read', args: { path: '/x', ms: 50 } },
        { id: 'f', tool: 'pure', args: { ms: 10, fail: 'always' } },
        { id: 'b', tool: 'write', args: { path: '/x', dep: '${f.output.id}' } },
        { id: 'c', tool: 'write', args: { path: '/x', ms: 10 } },
      ],
    });
    r.run();
    expect(ends(r.events)).toEqual(['10 f failed', '10 b blocked', '50 r ok', '60 c ok']);
    expect(starts(r.events)).toEqual(['0 r', '0 f', '50 c']);
  });

  it('a call blocked early, whose hazard with an earlier writer rides on a data edge, keeps the next writer waiting', () => {
    // w3 reads w2's output, so the plan carries the w2→w3 hazard by that data edge alone, and only
    // w3→w4 is a conflict edge. f fails at 10 and blocks w3 while w2 still runs: w4 must wait for w2.
    const r = rig({ tools });
    r.submit(0, {
      calls: [
        { id: 'f', tool: 'pure', args: { ms: 10, fail: 'always' } },
        { id: 'w2', tool: 'write', args: { path: '/x', ms: 30 } },
        { id: 'w3', tool: 'write', args: { path: '/x', a: '${w2.output.id}', b: '${f.output.id}' } },
        { id: 'w4', tool: 'write', args: { path: '/x', ms: 10 } },
      ],
    });
    r.run();
    const started = r.events[1];
    const edges = (started?.type === 'run.started' ? started.data.edges : []).map((e) => `${e.from}>${e.to} ${e.kind}`);
    expect(edges).toEqual(['w2>w3 data', 'f>w3 data', 'w3>w4 conflict']);
    expect(ends(r.events)).toEqual(['10 f failed', '10 w3 blocked', '30 w2 ok', '40 w4 ok']);
    expect(starts(r.events)).toEqual(['0 f', '0 w2', '30 w4']);
  });
});

describe('priority among ready calls of one run', () => {
  it('longest remaining path first, then original index (per-run limit 1)', () => {
    const r = rig({ tools, limits: { perRun: 1 } });
    r.submit(0, {
      calls: [
        { id: 'd', tool: 'pure' },
        { id: 'e', tool: 'pure' },
        { id: 'a', tool: 'pure' },
        { id: 'b', tool: 'pure', args: { x: '${a.output.id}' } },
        { id: 'c', tool: 'pure', args: { x: '${b.output.id}' } },
      ],
    });
    r.run();
    // paths: a 3, b 2, c 1, d 1, e 1 (no learned durations: every tool counts 1).
    expect(starts(r.events)).toEqual(['0 a', '10 b', '20 d', '30 e', '40 c']);
  });

  it('estimated durations weigh the path: one slow call goes before a chain of three fast ones', () => {
    const r = rig({ tools: [...tools, tool('slow', PURE)], limits: { perRun: 1 } });
    r.submit(0, {
      estimates: { pure: 1, slow: 100 },
      calls: [
        { id: 'a', tool: 'pure' },
        { id: 'b', tool: 'pure', args: { x: '${a.output.id}' } },
        { id: 'c', tool: 'pure', args: { x: '${b.output.id}' } },
        { id: 's', tool: 'slow' },
      ],
    });
    r.run();
    expect(starts(r.events)).toEqual(['0 s', '10 a', '20 b', '30 c']);
  });

  it('learned durations from an earlier run rank the next run', () => {
    const r = rig({ tools: [...tools, tool('slow', PURE)], limits: { perRun: 1 } });
    r.submit(0, {
      runId: 'warm',
      calls: [
        { id: 's', tool: 'slow', args: { ms: 100 } },
        { id: 'p', tool: 'pure', args: { ms: 1 } },
      ],
    });
    r.submit(1000, {
      runId: 'r2',
      calls: [
        { id: 'a', tool: 'pure', args: { ms: 1 } },
        { id: 'b', tool: 'pure', args: { ms: 1, x: '${a.output.id}' } },
        { id: 's', tool: 'slow', args: { ms: 100 } },
      ],
    });
    r.run();
    expect(r.scheduler.estimates()).toEqual({ pure: 1, slow: 100 });
    expect(starts(r.events.filter((e) => e.runId === 'r2'))).toEqual(['1000 s', '1100 a', '1101 b']);
  });
});
