/**
 * Summarizes a V8 CPU profile (`node --cpu-prof`): the functions with the most self time, and self
 * time per source file, so a missed benchmark target can name its hot spots.
 *
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof bin/toolgraph.mjs bench --quick --only core
 *   npx tsx scripts/hotspots.ts /tmp/prof/CPU.*.cpuprofile [--top 25] [--filter src/]
 *
 * `--filter` keeps only the samples whose stack contains a frame from a matching URL (say, the scheduler
 * part of a profile), and adds an "inclusive" column: time with such a function anywhere on the stack.
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const args = process.argv.slice(2);
const files = args.filter((a, i) => !a.startsWith('--') && !args[i - 1]?.startsWith('--'));
const opt = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const top = Number(opt('--top') ?? 25);
const filter = opt('--filter');
if (files.length === 0) {
  console.error('usage: tsx scripts/hotspots.ts PROFILE.cpuprofile [--top N] [--filter URL_PART]');
  process.exit(2);
}

for (const file of files) {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const short = (url: string) =>
    url
      .replace(/^file:\/\//, '')
      .replace(/^.*\/node_modules\//, 'node_modules/')
      .replace(/^.*\/(src|bench|tests)\//, '$1/');
  const label = (f: CallFrame) => `${f.functionName || '(anonymous)'} ${f.url ? `${short(f.url)}:${f.lineNumber + 1}` : ''}`.trim();
  const self = new Map<string, number>();
  const incl = new Map<string, number>();
  const byFile = new Map<string, number>();
  let total = 0;
  p.samples.forEach((id, k) => {
    const dt = (p.timeDeltas[k] ?? 0) / 1000;
    const stack: CallFrame[] = [];
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) stack.push((byId.get(cur) as ProfileNode).callFrame);
    if (filter && !stack.some((f) => f.url.includes(filter))) return;
    total += dt;
    const leaf = stack[0] as CallFrame;
    self.set(label(leaf), (self.get(label(leaf)) ?? 0) + dt);
    const f = leaf.url ? short(leaf.url) : leaf.functionName;
    byFile.set(f, (byFile.get(f) ?? 0) + dt);
    for (const l of new Set(stack.map(label))) incl.set(l, (incl.get(l) ?? 0) + dt);
  });
  const pct = (ms: number) => `${((ms * 100) / total).toFixed(1).padStart(5)}%`;
  console.log(`${file}: ${total.toFixed(0)} ms sampled${filter ? ` (stacks through ${filter})` : ''}`);
  console.log(`\nself time, top ${top} functions:`);
  for (const [l, ms] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`  ${ms.toFixed(0).padStart(7)} ms ${pct(ms)}  incl ${pct(incl.get(l) ?? 0)}  ${l}`);
  }
  console.log(`\nself time by file:`);
  for (const [f, ms] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`  ${ms.toFixed(0).padStart(7)} ms ${pct(ms)}  ${f}`);
  console.log(`\ninclusive time, top ${top} functions:`);
  for (const [l, ms] of [...incl].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`  ${ms.toFixed(0).padStart(7)} ms ${pct(ms)}  ${l}`);
}
