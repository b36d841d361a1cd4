/** Progress and results for `toolgraph run`: a live line on a terminal, plain lines otherwise, a table. */
import type { RunEvent } from '../core/events.js';
import type { CallView, RunView } from '../core/view.js';
import type { Io } from './options.js';

export function progressLine(e: RunEvent, view: RunView): string | undefined {
  const t = `+${String(e.at - Date.parse(view.createdAt)).padStart(5)}ms`;
  const c = e.callId;
  const d = e.data;
  switch (e.type) {
    case 'call.started':
      return `${t} ${c} started (attempt ${d.attempt as number})`;
    case 'call.succeeded':
      return `${t} ${c} succeeded`;
    case 'call.failed':
      return `${t} ${c} failed: ${(d.error as { code: string; message: string }).code}: ${(d.error as { message: string }).message}`;
    case 'call.retry_scheduled':
      return `${t} ${c} will retry in ${d.delayMs as number}ms`;
    case 'call.blocked':
      return `${t} ${c} blocked: ${(d.blockedBy as { message: string }).message}`;
    case 'call.cancelled':
      return `${t} ${c} cancelled: ${(d.reason as { message: string }).message}`;
    case 'call.awaiting_review':
      return `${t} ${c} awaits review: ${d.reason as string}`;
    case 'review.decided':
      return `${t} ${c} review: ${d.decision as string}`;
    case 'call.compensated':
      return `${t} ${c} compensated: ${d.status as string}`;
    case 'run.completed':
      return `${t} run ${d.status as string}`;
    default:
      return undefined;
  }
}

/** One status line, redrawn in place. */
export class Progress {
  private drawn = false;

  constructor(private readonly io: Io) {}

  update(e: RunEvent, view: RunView): void {
    const counts = new Map<string, number>();
    for (const c of view.calls) counts.set(c.status, (counts.get(c.status) ?? 0) + 1);
    const parts = [...counts].map(([s, n]) => `${n} ${s}`).join(' · ');
    const line = progressLine(e, view);
    if (line && e.type !== 'call.started') this.io.err(`\r\x1b[K${line}\n`);
    this.io.err(`\r\x1b[K${view.calls.length} calls: ${parts}`);
    this.drawn = true;
  }

  finish(): void {
    if (this.drawn) this.io.err('\r\x1b[K');
  }
}

function duration(c: CallView): string {
  if (!c.startedAt || !c.endedAt) return '-';
  return `${Date.parse(c.endedAt) - Date.parse(c.startedAt)}ms`;
}

function outcome(c: CallView): string {
  const e = c.error ?? c.blockedBy;
  const text = c.status === 'succeeded' ? JSON.stringify(c.output) : e ? `${e.code}: ${e.message}` : '';
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

export function resultsTable(view: RunView): string {
  const header = ['CALL', 'TOOL', 'STATUS', 'ATTEMPTS', 'TIME', 'OUTPUT / ERROR'];
  const rows = view.calls.map((c) => [c.id, c.tool, c.status, String(c.attempts), duration(c), outcome(c)]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const fmt = (r: string[]) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] as number))).join('  ');
  const lines = [fmt(header), ...rows.map(fmt), '', `run ${view.id}: ${view.status}`];
  for (const d of view.diagnostics) lines.push(`${d.code}: ${d.message}`);
  return `${lines.join('\n')}\n`;
}
