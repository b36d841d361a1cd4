/**
 * CPU profiles of blocks of work, summed per side: for benchmarks that alternate two sides (A, B, A,
 * B, …) in one process, where one profile of the whole run could not tell which side a sample of
 * shared code (an SDK, node's streams) belongs to. Each block is profiled on its own (the inspector's
 * sampling profiler, started and stopped around it); the summary is the self time of each function
 * per call of that side, the functions that differ most first.
 */
import { Session } from 'node:inspector/promises';

interface ProfileNode {
  id: number;
  children?: number[];
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples?: number[];
  timeDeltas?: number[];
}

export interface BlockProfiler {
  /** Runs `block` under the profiler; its samples count for `side`, over `calls` calls. */
  profile<T>(side: string, calls: number, block: () => Promise<T>): Promise<T>;
  /** The top `n` functions by the difference of µs of self time per call between sides `a` and `b`. */
  summary(a: string, b: string, n?: number): string;
  close(): void;
}

/** A short name of a function: `name file:line`, with the package or our src path. */
function frameName(f: ProfileNode['callFrame']): string {
  const name = f.functionName || '(anonymous)';
  if (f.url === '') return name;
  const url = f.url.replace(/^file:\/\//, '');
  const short = url.includes('node_modules/')
    ? url.slice(url.lastIndexOf('node_modules/') + 13)
    : url.includes('/src/')
      ? url.slice(url.lastIndexOf('/src/') + 1)
      : url;
  return `${name} ${short}:${f.lineNumber + 1}`;
}

export async function blockProfiler(intervalUs = 100): Promise<BlockProfiler> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: intervalUs });
  /** µs of self time by function, per side; calls per side. */
  const self = new Map<string, Map<string, number>>();
  const calls = new Map<string, number>();

  const add = (side: string, p: Profile) => {
    const byId = new Map(p.nodes.map((n) => [n.id, n]));
    // The profiler's own work (stopping it, sending the profile) is left out: every node below a
    // frame of node:inspector.
    const own = new Set<number>();
    const mark = (id: number): void => {
      own.add(id);
      for (const c of byId.get(id)?.children ?? []) mark(c);
    };
    for (const n of p.nodes) if (n.callFrame.url === 'node:inspector' && !own.has(n.id)) mark(n.id);
    const m = self.get(side) ?? new Map<string, number>();
    self.set(side, m);
    const samples = p.samples ?? [];
    for (let i = 0; i < samples.length; i++) {
      const node = byId.get(samples[i] as number);
      if (!node || own.has(node.id)) continue;
      const k = frameName(node.callFrame);
      m.set(k, (m.get(k) ?? 0) + (p.timeDeltas?.[i] ?? 0));
    }
  };

  return {
    async profile(side, n, block) {
      await session.post('Profiler.start');
      try {
        return await block();
      } finally {
        const { profile } = (await session.post('Profiler.stop')) as { profile: Profile };
        add(side, profile);
        calls.set(side, (calls.get(side) ?? 0) + n);
      }
    },
    summary(a, b, n = 20) {
      const per = (side: string, k: string) => (self.get(side)?.get(k) ?? 0) / (calls.get(side) || 1);
      const keys = new Set([...(self.get(a)?.keys() ?? []), ...(self.get(b)?.keys() ?? [])]);
      const total = (side: string) =>
        [...(self.get(side)?.entries() ?? [])].filter(([k]) => k !== '(idle)').reduce((s, [, v]) => s + v, 0) / (calls.get(side) || 1);
      const rows = [...keys]
        .filter((k) => k !== '(idle)')
        .map((k) => ({ k, a: per(a, k), b: per(b, k) }))
        .sort((x, y) => Math.abs(y.b - y.a) - Math.abs(x.b - x.a))
        .slice(0, n);
      return (
        `CPU self time, µs per call (samples every ${intervalUs} µs; idle left out)\n\n` +
        `| function | ${a} | ${b} | ${b} − ${a} |\n|---|---|---|---|\n` +
        `| **all but idle** | ${total(a).toFixed(2)} | ${total(b).toFixed(2)} | ${(total(b) - total(a)).toFixed(2)} |\n` +
        rows
          .map((r) => `| ${r.k.replaceAll('|', '\\|')} | ${r.a.toFixed(2)} | ${r.b.toFixed(2)} | ${(r.b - r.a).toFixed(2)} |`)
          .join('\n') +
        '\n'
      );
    },
    close() {
      session.disconnect();
    },
  };
}
