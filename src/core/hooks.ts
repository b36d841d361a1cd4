/**
 * Hooks (DESIGN §14), as the core sees them: which calls a hook is for (the policy matcher), what the
 * scheduler asks the shell to run (`HookRequest`), what the shell answers (`HookAnswer`, one
 * `HookDecision` per hook that ran), and whether new args stay within the resources the graph was
 * planned on (`escapedKeys`). The core never calls a hook: the live engine runs them (src/hooks/),
 * replay answers with the recorded decisions.
 */
import type { CallError } from './errors.js';
import { ruleMatches } from './policy.js';
import type { Access, Key } from './resources.js';
import type { PolicyMatch, ToolManifest } from './tool.js';

export const HOOK_EVENTS = ['before_call', 'after_call'] as const;
export type HookOn = (typeof HOOK_EVENTS)[number];

/** Which calls a hook is for, as a policy rule's `match` (DESIGN §5). */
export interface HookMatcher {
  on: HookOn;
  /** Names the hook in events, metrics and recordings; default `hooks[<index>]`. */
  name: string;
  match: PolicyMatch;
}

/**
 * What a hook decided. `before_call`: `allow`, `deny` or `review` (with `args` when it rewrote them).
 * `after_call`: `allow` (the output stands), `replace` (`output` replaces it) or `fail` (`fail`).
 */
export const HOOK_DECISIONS = ['allow', 'deny', 'review', 'replace', 'fail'] as const;
export type HookDecisionKind = (typeof HOOK_DECISIONS)[number];

/** One hook's decision, as the shell reports it and the `call.hook` event records it. */
export interface HookDecision {
  /** The hook's name (`HookMatcher.name`). */
  hook: string;
  decision: HookDecisionKind;
  /** When the hook was called (the scheduler's clock) and how long it took. */
  startedAt: number;
  durationMs: number;
  reason?: string;
  args?: Record<string, unknown>;
  output?: unknown;
  fail?: { message: string };
  /** The hook itself failed (timeout, refused, a bad answer): `decision` is what `onError` made of it. */
  error?: string;
}

/** Hooks for the shell to run for one call; it answers with `Scheduler.hookDecided`. */
export interface HookRequest {
  on: HookOn;
  runId: string;
  callId: string;
  /** The call's place in its run (hand it back in `HookAnswer.index`). */
  index: number;
  tenant: string;
  tool: ToolManifest;
  /** The resolved args (the ones the call ran with, for `after_call`). */
  args: Record<string, unknown>;
  /** The indexes (in `SchedulerOptions.hooks`) of the hooks that match, in config order. */
  hooks: number[];
  /** `after_call`: how the call's last attempt ended. */
  status?: 'succeeded' | 'failed';
  output?: unknown;
  error?: CallError;
}

/** The shell's answer to a `HookRequest`: the decisions of the hooks that ran, in order. */
export interface HookAnswer {
  on: HookOn;
  runId: string;
  callId: string;
  index?: number;
  decisions: HookDecision[];
}

/** The hooks of `on` that match a call of `tool` in `tenant`, by index. */
export function matchingHooks(hooks: readonly HookMatcher[], on: HookOn, tool: ToolManifest, tenant: string): number[] {
  const out: number[] = [];
  for (let i = 0; i < hooks.length; i++) {
    const h = hooks[i] as HookMatcher;
    if (h.on === on && ruleMatches(h, tool, tenant)) out.push(i);
  }
  return out;
}

/** Whether key `k` lies within `p`: equal to it or below it, a `*` segment of `p` standing for any one. */
export function within(k: Key, p: Key): boolean {
  const a = k.segs;
  const b = p.segs;
  if (b.length > a.length) return false;
  for (let i = 0; i < b.length; i++) if (b[i] !== '*' && b[i] !== a[i]) return false;
  return true;
}

/**
 * The keys of `next` that the `planned` access does not cover (DESIGN §14): a write must lie within a
 * planned write, a read within a planned read or write. Empty when every key is covered.
 */
export function escapedKeys(planned: Access, next: Access): { reads: string[]; writes: string[] } {
  const inside = (k: Key, keys: readonly Key[]) => keys.some((p) => within(k, p));
  return {
    writes: next.writes.filter((k) => !inside(k, planned.writes)).map((k) => k.text),
    reads: next.reads.filter((k) => !inside(k, planned.writes) && !inside(k, planned.reads)).map((k) => k.text),
  };
}

/** `limits.hooksInFlight` when a config does not say: hook requests running at once in a process. */
export const DEFAULT_HOOKS_IN_FLIGHT = 64;
