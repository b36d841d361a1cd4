/**
 * Reports of `toolgraph replay`: a readable diff per recording (which call, what was recorded, what
 * replay gave, the first start that differs), a summary table for a corpus, a JSON report and JUnit XML
 * (one testcase per recording, a failure carrying the diff text).
 */
import type { CallSummary, Divergence, FirstDifference, StartRef } from './compare.js';
import type { RecordingResult } from './check.js';

function clip(text: string, max = 100): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function callText(s: CallSummary | undefined): string {
  if (!s) return 'not in the run';
  const parts: string[] = [s.status];
  if (s.attempts > 0) parts.push(`after ${plural(s.attempts, 'attempt')}, first started at ${s.firstStartMs} ms`);
  else parts.push('never started');
  if (s.status === 'succeeded') parts.push(`output ${clip(JSON.stringify(s.output) ?? 'undefined')}`);
  if (s.error) parts.push(clip(`${s.error.code}: ${s.error.message}`));
  if (s.compensation) parts.push(`compensation ${s.compensation}`);
  return parts.join(', ');
}

function startName(s: StartRef): string {
  return `${s.callId} (${s.compensation ? 'compensation' : `attempt ${s.attempt}`})`;
}

export function firstDifferenceText(f: FirstDifference): string {
  const name = startName(f.start);
  if (f.what === 'missing') return `${name}: recorded at ${f.start.recordedMs} ms; replay never started it`;
  if (f.what === 'extra') return `${name}: replay started it at ${f.start.replayMs} ms; the recording never did`;
  const o = f.other as StartRef;
  return (
    `${name}: recorded at ${f.start.recordedMs} ms, after ${startName(o)} at ${o.recordedMs} ms; ` +
    `replay started it at ${f.start.replayMs} ms, before ${o.callId} at ${o.replayMs} ms`
  );
}

/** One divergence as indented lines; `first` is the recording's first differing start, if known. */
export function divergenceText(d: Divergence, first?: FirstDifference): string[] {
  switch (d.kind) {
    case 'run_status':
      return [`run status: recorded ${d.recorded}, replay ${d.replay}`];
    case 'call': {
      const what = d.fields.includes('presence')
        ? d.recorded
          ? 'missing from the replay'
          : 'not in the recording'
        : `differs in ${d.fields.join(', ')}`;
      const lines = [
        `call ${d.callId}${d.tool ? ` (${d.tool})` : ''}: ${what}`,
        `  recorded: ${callText(d.recorded)}`,
        `  replay:   ${callText(d.replay)}`,
      ];
      if (d.outputDiff) {
        const show = (v: unknown) => (v === undefined ? 'nothing' : clip(JSON.stringify(v), 60));
        lines.push(
          `  output first differs at ${d.outputDiff.path}: recorded ${show(d.outputDiff.recorded)}, replay ${show(d.outputDiff.replay)}`,
        );
      }
      return lines;
    }
    case 'order': {
      const line = `order of starts: ${plural(d.count, 'start')} out of order`;
      // The first violation is spelled out below as the first start that differs, unless another came first.
      if (first?.what === 'order') return [line];
      return [`${line}; the first: ${firstDifferenceText({ what: 'order', start: d.after, other: d.before })}`];
    }
    case 'missing_attempt':
      return [`${startName(d.start)} at ${d.start.replayMs} ms: ${d.message}; replay ended it as a failure`];
    case 'input':
      return [`recorded input: ${d.message}`];
  }
}

/** The block for one recording: a MATCH line, or DIVERGED with the diff; `configName` for what-if. */
export function resultText(r: RecordingResult, configName?: string): string {
  if (r.error) return `UNREADABLE ${r.error}\n`;
  const rec = r.recorded as NonNullable<RecordingResult['recorded']>;
  const rep = r.replay as NonNullable<RecordingResult['replay']>;
  const makespan = `makespan ${rec.makespanMs} ms recorded → ${rep.makespanMs} ms ${configName ? `under ${configName}` : 'replayed'}`;
  if (r.ok) return `MATCH    ${r.file} (run ${r.runId}, ${rec.status}, ${makespan})\n`;
  const lines = [`DIVERGED ${r.file} (run ${r.runId}): ${plural(r.divergences.length, 'divergence')}`, `  ${makespan}`];
  if (configName) {
    const changed = r.divergences.filter((d) => d.kind === 'call' && d.fields.some((f) => f !== 'attempts'));
    lines.push(
      `  outcomes that change under ${configName}: ${changed.length === 0 ? 'none' : changed.map((d) => (d as { callId: string }).callId).join(', ')}`,
    );
  }
  for (const d of r.divergences)
    for (const [i, l] of divergenceText(d, r.firstDifference).entries()) lines.push(`${i === 0 ? '  - ' : '    '}${l}`);
  lines.push(
    `  first start that differs: ${r.firstDifference ? firstDifferenceText(r.firstDifference) : 'none (every start as recorded)'}`,
  );
  return `${lines.join('\n')}\n`;
}

export interface Totals {
  recordings: number;
  match: number;
  diverged: number;
  unreadable: number;
}

export function totalsOf(results: readonly RecordingResult[]): Totals {
  const unreadable = results.filter((r) => r.error).length;
  const match = results.filter((r) => r.ok).length;
  return { recordings: results.length, match, diverged: results.length - match - unreadable, unreadable };
}

export function totalsLine(t: Totals): string {
  return `${plural(t.recordings, 'recording')}: ${t.match} match, ${t.diverged} diverged, ${t.unreadable} unreadable\n`;
}

/** A fixed-width table: one row per recording. */
export function summaryTable(results: readonly RecordingResult[]): string {
  const header = ['RECORDING', 'RUN', 'STATUS', 'CALLS', 'MAKESPAN (ms)', 'RESULT'];
  const rows = results.map((r) => {
    if (r.error) return [r.file, '-', '-', '-', '-', 'unreadable'];
    const rec = r.recorded as NonNullable<RecordingResult['recorded']>;
    const rep = r.replay as NonNullable<RecordingResult['replay']>;
    const status = rec.status === rep.status ? rec.status : `${rec.status} → ${rep.status}`;
    const result = r.ok ? 'match' : `${plural(r.divergences.length, 'divergence')}`;
    return [r.file, r.runId ?? '-', status, String(r.calls ?? 0), `${rec.makespanMs} → ${rep.makespanMs}`, result];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)));
  const fmt = (row: string[]) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] as number))).join('  ');
  return `${[fmt(header), ...rows.map(fmt)].join('\n')}\n`;
}

/** The machine-readable report of `--json`. */
export function jsonReport(results: readonly RecordingResult[], opts: { tolerance: number; config?: string }) {
  return {
    format: 'toolgraph.replay-report/v1',
    tolerance: opts.tolerance,
    ...(opts.config ? { config: opts.config } : {}),
    summary: totalsOf(results),
    recordings: results,
  };
}

const XML_INVALID = /[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu;

function xml(text: string): string {
  return text
    .replace(XML_INVALID, '\uFFFD')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}

/** JUnit XML: one testcase per recording; a divergence is a failure with the diff, unreadable an error. */
export function junitXml(results: readonly RecordingResult[], configName?: string): string {
  const t = totalsOf(results);
  const seconds = (ms: number) => (ms / 1000).toFixed(3);
  const total = seconds(results.reduce((s, r) => s + r.durationMs, 0));
  const name = `toolgraph replay${configName ? ` under ${configName}` : ''}`;
  const cases = results.map((r) => {
    const open = `    <testcase classname="toolgraph.replay" name="${xml(r.file)}" time="${seconds(r.durationMs)}"`;
    if (r.error)
      return `${open}>\n      <error type="unreadable" message="${xml(clip(r.error.split('\n')[0] as string, 200))}">${xml(r.error)}</error>\n    </testcase>`;
    if (r.ok) return `${open}/>`;
    const message = `${plural(r.divergences.length, 'divergence')} from the recording`;
    return `${open}>\n      <failure type="divergence" message="${xml(message)}">${xml(resultText(r, configName))}</failure>\n    </testcase>`;
  });
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="${xml(name)}" tests="${t.recordings}" failures="${t.diverged}" errors="${t.unreadable}" time="${total}">`,
    `  <testsuite name="${xml(name)}" tests="${t.recordings}" failures="${t.diverged}" errors="${t.unreadable}" skipped="0" time="${total}">`,
    ...cases,
    '  </testsuite>',
    '</testsuites>',
    '',
  ].join('\n');
}
