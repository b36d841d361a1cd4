/**
 * The two state machines (DESIGN §6): a call's status and a run's status. Each is a table of states
 * (`as const`), the union type of its states is derived from it, and its one `transition` function
 * refuses every move the table does not list: a bug in the scheduler shows up as an exception in
 * tests instead of as a silently wrong run. "Ended" (terminal) is defined here, once per machine.
 *
 * Calls:
 *   pending          → ready | awaiting_review | failed | blocked | cancelled
 *   ready            → running | awaiting_review (a before_call hook asked for one) | failed | blocked
 *                      | cancelled                                  (a limit never moves it back)
 *   awaiting_review  → pending (approved or edited) | ready | failed (review_rejected) | blocked | cancelled
 *   running          → succeeded | failed | cancelled | pending (a retry waits for its backoff)
 *   blocked          → cancelled (superseded by a replan)                                    ended
 *   succeeded, failed, cancelled: no exits                                                  ended
 *
 * Runs:
 *   queued           → running | cancelled (a held run, DESIGN §4)
 *   running          → succeeded | partial | failed | needs_replan | deadlocked | cancelled
 *   needs_replan     → running (a replan appended calls, or a cancel stops the waiting ones)   ended
 *   succeeded, partial, failed, deadlocked, cancelled: no exits                            ended
 */

interface StateSpec<S extends string> {
  /** The run or call has ended (it may still leave `blocked` or `needs_replan`, as listed). */
  readonly ended: boolean;
  readonly exits: readonly S[];
}

export const CALL_STATUSES = ['pending', 'ready', 'running', 'awaiting_review', 'succeeded', 'failed', 'blocked', 'cancelled'] as const;
export type CallStatus = (typeof CALL_STATUSES)[number];

export const CALL_STATES = {
  pending: { ended: false, exits: ['ready', 'awaiting_review', 'failed', 'blocked', 'cancelled'] },
  ready: { ended: false, exits: ['running', 'awaiting_review', 'failed', 'blocked', 'cancelled'] },
  running: { ended: false, exits: ['succeeded', 'failed', 'cancelled', 'pending'] },
  awaiting_review: { ended: false, exits: ['pending', 'ready', 'failed', 'blocked', 'cancelled'] },
  succeeded: { ended: true, exits: [] },
  failed: { ended: true, exits: [] },
  blocked: { ended: true, exits: ['cancelled'] },
  cancelled: { ended: true, exits: [] },
} as const satisfies Record<CallStatus, StateSpec<CallStatus>>;

export const RUN_STATUSES = ['queued', 'running', 'succeeded', 'partial', 'failed', 'needs_replan', 'deadlocked', 'cancelled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export const RUN_STATES = {
  queued: { ended: false, exits: ['running', 'cancelled'] },
  running: { ended: false, exits: ['succeeded', 'partial', 'failed', 'needs_replan', 'deadlocked', 'cancelled'] },
  succeeded: { ended: true, exits: [] },
  partial: { ended: true, exits: [] },
  failed: { ended: true, exits: [] },
  needs_replan: { ended: true, exits: ['running'] },
  deadlocked: { ended: true, exits: [] },
  cancelled: { ended: true, exits: [] },
} as const satisfies Record<RunStatus, StateSpec<RunStatus>>;

// Both tables name every state of their list (and nothing else): `satisfies` above checks one way,
// these the other.
const callStatesListed: Exclude<keyof typeof CALL_STATES, CallStatus> extends never ? true : false = true;
const runStatesListed: Exclude<keyof typeof RUN_STATES, RunStatus> extends never ? true : false = true;
void callStatesListed;
void runStatesListed;

/** `allowed[from][to]`: one property lookup per transition, on the hot path of every call. */
function movesOf<S extends string>(states: Record<S, StateSpec<S>>): Record<S, Partial<Record<S, true>>> {
  const out = {} as Record<S, Partial<Record<S, true>>>;
  for (const from in states) {
    const to: Partial<Record<S, true>> = {};
    for (const s of states[from].exits) to[s] = true;
    out[from] = Object.freeze(to);
  }
  return Object.freeze(out);
}

const CALL_MOVES = movesOf<CallStatus>(CALL_STATES);
const RUN_MOVES = movesOf<RunStatus>(RUN_STATES);

export const TERMINAL_CALL_STATUSES: ReadonlySet<CallStatus> = new Set(CALL_STATUSES.filter((s) => CALL_STATES[s].ended));
export const TERMINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set(RUN_STATUSES.filter((s) => RUN_STATES[s].ended));

export class IllegalTransition extends Error {
  constructor(what: string, from: string, to: string) {
    super(`${what}: illegal transition ${from} → ${to}`);
  }
}

/** Moves a call to `to`, or throws `IllegalTransition` when its machine has no such move. */
export function transition(call: { id: string; status: CallStatus }, to: CallStatus): void {
  if (CALL_MOVES[call.status][to] !== true) throw new IllegalTransition(`call ${call.id}`, call.status, to);
  call.status = to;
}

/** Moves a run to `to`, or throws `IllegalTransition` when its machine has no such move. */
export function transitionRun(run: { id: string; status: RunStatus }, to: RunStatus): void {
  if (RUN_MOVES[run.status][to] !== true) throw new IllegalTransition(`run ${run.id}`, run.status, to);
  run.status = to;
}

/** Whether a call has ended (succeeded, failed, blocked or cancelled). */
export function isTerminal(status: CallStatus): boolean {
  return CALL_STATES[status].ended;
}

/** Whether a run has ended (`needs_replan` included: it waits for a replan, nothing runs). */
export function isRunEnded(status: RunStatus): boolean {
  return RUN_STATES[status].ended;
}

/**
 * The shortest sequence of legal moves that takes a call from `from` to `to` (without `from`), or
 * undefined when there is none. Restore uses it to bring a call to the status its events gave it
 * through the same `transition` as a live run.
 */
export function callPath(from: CallStatus, to: CallStatus): CallStatus[] | undefined {
  const back = new Map<CallStatus, CallStatus>();
  const queue: CallStatus[] = [from];
  for (let i = 0; i < queue.length; i++) {
    const s = queue[i] as CallStatus;
    if (s === to) {
      const path: CallStatus[] = [];
      for (let at = to; at !== from; at = back.get(at) as CallStatus) path.unshift(at);
      return path;
    }
    for (const next of CALL_STATES[s].exits) {
      if (next === from || back.has(next)) continue;
      back.set(next, s);
      queue.push(next);
    }
  }
  return undefined;
}
