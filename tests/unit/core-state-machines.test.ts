import { describe, expect, it } from 'vitest';
import {
  CALL_STATES,
  CALL_STATUSES,
  IllegalTransition,
  RUN_STATES,
  RUN_STATUSES,
  TERMINAL_CALL_STATUSES,
  TERMINAL_RUN_STATUSES,
  callPath,
  isRunEnded,
  isTerminal,
  transition,
  transitionRun,
  type CallStatus,
  type RunStatus,
} from '../../src/core/state.js';

// The tables as DESIGN §6 and the comment atop state.ts give them, written out again by hand: a move
// added to or dropped from the code without this list changing fails here.
const CALL_EXITS: Record<CallStatus, CallStatus[]> = {
  pending: ['ready', 'awaiting_review', 'failed', 'blocked', 'cancelled'],
  ready: ['running', 'awaiting_review', 'failed', 'blocked', 'cancelled'],
  running: ['succeeded', 'failed', 'cancelled', 'pending'],
  awaiting_review: ['pending', 'ready', 'failed', 'blocked', 'cancelled'],
  succeeded: [],
  failed: [],
  blocked: ['cancelled'],
  cancelled: [],
};
const RUN_EXITS: Record<RunStatus, RunStatus[]> = {
  queued: ['running', 'cancelled'],
  running: ['succeeded', 'partial', 'failed', 'needs_replan', 'deadlocked', 'cancelled'],
  succeeded: [],
  partial: [],
  failed: [],
  needs_replan: ['running'],
  deadlocked: [],
  cancelled: [],
};

describe('the call state machine', () => {
  it('has a row for every status and no other', () => {
    expect(Object.keys(CALL_STATES).sort()).toEqual([...CALL_STATUSES].sort());
  });

  for (const from of CALL_STATUSES) {
    for (const to of CALL_STATUSES) {
      const legal = CALL_EXITS[from].includes(to);
      it(`${legal ? 'accepts' : 'refuses'} ${from} → ${to}`, () => {
        const call = { id: 'c1', status: from };
        if (legal) {
          transition(call, to);
          expect(call.status).toBe(to);
        } else {
          expect(() => transition(call, to)).toThrow(IllegalTransition);
          expect(() => transition(call, to)).toThrow(`call c1: illegal transition ${from} → ${to}`);
          expect(call.status).toBe(from);
        }
      });
    }
  }

  it('defines ended once: succeeded, failed, blocked and cancelled', () => {
    const ended = CALL_STATUSES.filter((s) => isTerminal(s));
    expect(ended).toEqual(['succeeded', 'failed', 'blocked', 'cancelled']);
    expect([...TERMINAL_CALL_STATUSES]).toEqual(ended);
  });

  it('finds the shortest legal path between two statuses, or none', () => {
    expect(callPath('pending', 'succeeded')).toEqual(['ready', 'running', 'succeeded']);
    expect(callPath('pending', 'failed')).toEqual(['failed']);
    expect(callPath('pending', 'pending')).toEqual([]);
    expect(callPath('blocked', 'cancelled')).toEqual(['cancelled']);
    expect(callPath('succeeded', 'pending')).toBeUndefined();
    expect(callPath('cancelled', 'blocked')).toBeUndefined();
    // Every path it gives is a chain of legal moves.
    for (const from of CALL_STATUSES) {
      for (const to of CALL_STATUSES) {
        const path = callPath(from, to);
        if (!path) continue;
        const call = { id: 'c', status: from };
        for (const step of path) transition(call, step);
        expect(call.status).toBe(to);
      }
    }
  });
});

describe('the run state machine', () => {
  it('has a row for every status and no other', () => {
    expect(Object.keys(RUN_STATES).sort()).toEqual([...RUN_STATUSES].sort());
  });

  for (const from of RUN_STATUSES) {
    for (const to of RUN_STATUSES) {
      const legal = RUN_EXITS[from].includes(to);
      it(`${legal ? 'accepts' : 'refuses'} ${from} → ${to}`, () => {
        const run = { id: 'r1', status: from };
        if (legal) {
          transitionRun(run, to);
          expect(run.status).toBe(to);
        } else {
          expect(() => transitionRun(run, to)).toThrow(`run r1: illegal transition ${from} → ${to}`);
          expect(run.status).toBe(from);
        }
      });
    }
  }

  it('defines ended once: everything but queued and running (needs_replan included)', () => {
    const ended = RUN_STATUSES.filter((s) => isRunEnded(s));
    expect(ended).toEqual(['succeeded', 'partial', 'failed', 'needs_replan', 'deadlocked', 'cancelled']);
    expect([...TERMINAL_RUN_STATUSES]).toEqual(ended);
  });
});
