/**
 * Client-run tools in the engine (DESIGN §17): each attempt of a `client` tool gets a fresh token,
 * stamped on its start (for the executor, executors/client.ts) and on its `call.started` (for the
 * agent, and for every replica that reads the run's events) before either is stored or started.
 */
import type { EventOf } from '../core/events.js';
import type { Output, StartAttempt } from '../core/scheduler.js';
import { dispatchToken, isClientTool } from '../executors/client.js';

/**
 * Stamps a token on every start of a client tool in `out` that has none, and on its `call.started`;
 * `announce` is told of each (the engine's ClientDesk, which then takes an answer that comes early).
 */
export function stampDispatch(out: Output, opts: { token?: () => string; announce?: (s: StartAttempt) => void } = {}): void {
  const token = opts.token ?? dispatchToken;
  let started: Map<string, EventOf<'call.started'>> | undefined;
  for (const s of out.starts) {
    if (s.kind !== 'call' || s.dispatch !== undefined || !isClientTool(s.tool)) continue;
    started ??= startedEvents(out);
    const dispatch = { token: token() };
    s.dispatch = dispatch;
    opts.announce?.(s);
    const e = started.get(keyOf(s.runId, s.callId as string, s.attempt));
    if (e) e.data.dispatch = dispatch;
  }
}

function startedEvents(out: Output): Map<string, EventOf<'call.started'>> {
  const map = new Map<string, EventOf<'call.started'>>();
  for (const e of out.events) if (e.type === 'call.started') map.set(keyOf(e.runId, e.callId as string, e.data.attempt), e);
  return map;
}

function keyOf(runId: string, callId: string, attempt: number): string {
  return `${runId}\u0000${callId}\u0000${attempt}`;
}
