/**
 * Policy (DESIGN §5): which rules match a call, and what they ask for.
 *
 * Every matching rule applies. A `deny` always wins (an `allow` never bypasses it). Review: a rule with
 * `review: true` asks for it; dangerous tools are reviewed by default unless a matching rule says
 * `review: false` or `allow: true`. `after`/`requires` from the tool and from rules are unioned.
 */
import { Memo } from './memo.js';
import type { Policy, PolicyRule, ToolManifest } from './tool.js';

/** Compiled globs (pure, shared process-wide: see memo.ts). Globs come from configs, so few. */
export const GLOBS = new Memo<RegExp>(10_000);

/** `*` matches any run of characters, `?` one character; everything else is literal. */
export function globToRegExp(glob: string): RegExp {
  return GLOBS.get(glob, compileGlob);
}

function compileGlob(glob: string): RegExp {
  const body = glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${body}$`);
}

export function globMatch(glob: string, value: string): boolean {
  return glob === value || globToRegExp(glob).test(value);
}

export function ruleMatches(rule: PolicyRule, tool: ToolManifest, tenant: string): boolean {
  const m = rule.match;
  if (m.tool !== undefined && !globMatch(m.tool, tool.name)) return false;
  if (m.risk !== undefined && m.risk !== tool.risk) return false;
  if (m.tenant !== undefined && !globMatch(m.tenant, tenant)) return false;
  return true;
}

export interface Ordering {
  /** Tool name or glob. */
  pattern: string;
  /** Where it comes from, for the edge's reason: `tool deploy` or `policy rule 2`. */
  source: string;
}

export interface CallPolicy {
  deny?: string;
  review?: string;
  after: Ordering[];
  requires: Ordering[];
}

function describeRule(rule: PolicyRule, index: number): string {
  const m = rule.match;
  const parts = [m.tool && `tool ${m.tool}`, m.risk && `risk ${m.risk}`, m.tenant && `tenant ${m.tenant}`].filter(Boolean);
  return `policy rule ${index + 1}${parts.length ? ` (${parts.join(', ')})` : ''}`;
}

export function policyFor(tool: ToolManifest, tenant: string, policy: Policy): CallPolicy {
  const out: CallPolicy = {
    after: tool.after.map((pattern) => ({ pattern, source: `tool ${tool.name}` })),
    requires: tool.requires.map((pattern) => ({ pattern, source: `tool ${tool.name}` })),
  };
  let reviewAsked: string | undefined;
  let reviewWaived = false;
  policy.rules.forEach((rule, i) => {
    if (!ruleMatches(rule, tool, tenant)) return;
    const source = describeRule(rule, i);
    if (rule.deny !== undefined && out.deny === undefined) out.deny = rule.deny;
    if (rule.review === true && reviewAsked === undefined) reviewAsked = `${source} asks for review`;
    if (rule.review === false || rule.allow === true) reviewWaived = true;
    for (const pattern of rule.after ?? []) out.after.push({ pattern, source });
    for (const pattern of rule.requires ?? []) out.requires.push({ pattern, source });
  });
  if (reviewAsked !== undefined) out.review = reviewAsked;
  else if (tool.risk === 'dangerous' && !reviewWaived) out.review = `${tool.name} is dangerous`;
  return out;
}
