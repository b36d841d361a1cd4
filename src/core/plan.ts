/**
 * Building the execution graph of a batch (DESIGN §1, §3, §5).
 *
 * 1. Each call is checked: its tool exists, policy does not deny it, its references name calls of the
 *    run (by id, or by a tool used exactly once), `requires` finds a call, and args without references
 *    pass the tool's schema. A call that fails a check fails with that code, like a tool error.
 * 2. Data edges (references) and policy edges (`after`/`requires`) are added; cycles among them are
 *    found with their path and their calls are blocked (`cycle`).
 * 3. Conflict edges order every pair of calls with a resource hazard, in the stable topological order
 *    of the data+policy graph (ties by original index), through an index per resource.
 * 4. The result is a graphology graph, every edge with a `kind` and a `reason`, and its generations.
 */
import { DirectedGraph } from 'graphology';
import type { CallInput, Diagnostic, Edge, EdgeKind } from './calls.js';
import { fromPairs, reversed, successorLists, type Adjacency } from './adjacency.js';
import { findCycles } from './cycles.js';
import { callError, type CallError } from './errors.js';
import { HazardIndex, describeHazard } from './hazards.js';
import { stableTopologicalOrder, topologicalGenerations } from './order.js';
import { globMatch, policyFor, type CallPolicy, type Ordering } from './policy.js';
import { findReferences, hasTemplates, resolveValue, type FoundReferences, type Reference } from './references.js';
import { accessOf, PURE, type Access } from './resources.js';
import type { Catalog, Policy, ToolManifest } from './tool.js';

export interface PlannedCall {
  index: number;
  id: string;
  tool: string;
  args: Record<string, unknown>;
  manifest?: ToolManifest;
  /** Set when the call fails at plan time (`unknown_tool`, `invalid_args`, `policy_denied`…). */
  error?: CallError;
  /** Set when the call is blocked at plan time (`cycle`). */
  blockedBy?: CallError;
  /** Why the call waits for a human, when it does. */
  review?: string;
  /** Reference target as written → the call id it names. */
  targets: ReadonlyMap<string, string>;
  /**
   * Per reference in `args`, in document order (as `findReferences` lists them and `resolveValue`
   * looks them up): the index of the call it names (the last call with the id `targets` gives), or -1
   * when it names none (then the call fails at plan time).
   */
  refCalls: number[];
  /** Whether args hold references (they are resolved and checked when the call starts). */
  hasRefs: boolean;
  /** Whether args hold a `${` at all (a reference, or a `$${` escape to undo when the call starts). */
  templated: boolean;
  access: Access;
}

export interface Plan {
  calls: PlannedCall[];
  edges: Edge[];
  generations: string[][];
  diagnostics: Diagnostic[];
  graph: DirectedGraph;
  /** Call indexes in the stable topological order of data+policy edges (cycles left out); conflict
   *  edges follow it too, so it is a topological order of the whole graph. */
  order: number[];
  /** Per call index, its successors of every kind (made on first use from `adjacency`). */
  readonly succ: number[][];
  /** Every edge, flat: the successors of each call, of every kind, in the order of `edges`. */
  adjacency: Adjacency;
  /** The call indexes of every edge: `edges[k]` goes from call `edgeCalls[2k]` to `edgeCalls[2k + 1]`
   *  (so the scheduler wires edges without looking ids up). */
  edgeCalls: number[];
  /** Call id → index (the last call with that id). */
  byId: Map<string, number>;
}

export interface PlanInput {
  calls: readonly CallInput[];
  tenant: string;
  catalog: Catalog;
  policy: Policy;
}

export function buildPlan(input: PlanInput): Plan {
  const { calls, tenant, catalog, policy } = input;
  const n = calls.length;
  const byId = new Map<string, number>();
  for (let i = 0; i < n; i++) byId.set((calls[i] as CallInput).id, i);
  // Only policy orderings and references by tool name look calls up by tool: indexed on first use.
  let tools: Map<string, number[]> | undefined;
  const byTool = (): Map<string, number[]> => (tools ??= toolIndex(calls));
  // What policy asks of a call depends on its tool alone (the tenant is the run's): once per tool.
  const policies = new Map<ToolManifest, CallPolicy>();
  const policyOf = (m: ToolManifest): CallPolicy => {
    let cp = policies.get(m);
    if (!cp) policies.set(m, (cp = policyFor(m, tenant, policy)));
    return cp;
  };
  const links = new EdgeList(calls);
  const ctx: CheckContext = { calls, catalog, byId, byTool, policyOf, links };
  const planned: PlannedCall[] = [];
  for (let i = 0; i < n; i++) {
    const d = checkCall(calls[i] as CallInput, i, ctx);
    planned.push(d);
    if (d.manifest && !d.error) {
      const cp = policyOf(d.manifest);
      addOrderings(d, cp.after, 'after', ctx);
      addOrderings(d, cp.requires, 'requires', ctx);
    }
  }
  const { edges } = links;
  // The data and policy graph, flat (conflict edges come later, and follow its order).
  const dataGraph = fromPairs(n, links.ends);

  const diagnostics: Diagnostic[] = [];
  const cycles = findCycles(n, dataGraph);
  const onCycle = new Set<number>();
  for (const c of cycles) {
    const ids = c.path.map((i) => (calls[i] as CallInput).id);
    diagnostics.push({ code: 'cycle', message: `cycle among data and policy edges: ${ids.join(' → ')}`, callIds: ids });
    for (const m of c.members) {
      onCycle.add(m);
      const d = planned[m] as PlannedCall;
      if (!d.error) d.blockedBy = callError('cycle', `${d.id} is on the cycle ${ids.join(' → ')}`, { details: { cycle: ids } });
    }
  }
  // Indexed loops over the calls here: buildPlan runs once per batch, mostly unoptimized, where
  // for…of made an iterator result per call and pass.
  const failed: number[] = [];
  for (let i = 0; i < n; i++) {
    const d = planned[i] as PlannedCall;
    if (d.error) diagnostics.push({ code: d.error.code, message: d.error.message, callId: d.id });
    if (d.error || d.blockedBy) failed.push(i);
  }

  // Calls that will never run hold no resources: plan failures, cycles, and what depends on them.
  const doomed = descendants(failed, dataGraph);
  const order = stableTopologicalOrder(n, dataGraph, onCycle);
  // Conflict edges into a call are deduplicated against its data and policy edges: mark those first.
  const pred = reversed(dataGraph);
  const hazards = new HazardIndex();
  const anyDoomed = doomed.size > 0;
  for (let k = 0; k < order.length; k++) {
    const i = order[k] as number;
    if (anyDoomed && doomed.has(i)) continue;
    const found = hazards.scan(i, (planned[i] as PlannedCall).access);
    if (found === 0) continue;
    links.reopen(i, pred);
    for (let j = 0; j < found; j++) links.add(hazards.from(j), i, 'conflict', describeHazard(hazards.kind(j), hazards.key(j)));
  }

  // The graphology graph is built on first use: at 100k calls building it costs more than the rest of
  // the plan together (string-keyed adjacency objects), and the engine works on `succ` and `order`.
  let graph: DirectedGraph | undefined;
  const buildGraph = (): DirectedGraph => {
    const g = new DirectedGraph();
    for (const d of planned) g.addNode(d.id, { tool: d.tool, index: d.index });
    for (const e of edges) g.addDirectedEdge(e.from, e.to, { kind: e.kind, reason: e.reason });
    return g;
  };
  const all = fromPairs(n, links.ends);
  // Cycle members are left out of the generations (computed on the flat graph of every edge: copying
  // the graphology graph to drop them cost more than building it).
  const generations = topologicalGenerations(n, all, onCycle).map((g) => g.map((i) => (calls[i] as CallInput).id));
  // One array per call is 100k arrays to allocate and keep at 100k calls; the run works on `all`.
  let succ: number[][] | undefined;

  return {
    calls: planned,
    edges,
    generations,
    diagnostics,
    get graph() {
      graph ??= buildGraph();
      return graph;
    },
    order,
    get succ() {
      succ ??= successorLists(all);
      return succ;
    },
    adjacency: all,
    edgeCalls: links.ends,
    byId,
  };
}

/**
 * The plan's edges as they are added, one per pair of calls, with the call indexes of each edge. All
 * the edges into a call are added together (its data and policy edges while it is checked, its
 * conflict edges in the hazard pass), so `into[from] === to + 1` while `to`'s edges are added says
 * that from → to exists already (no Set of pairs).
 */
class EdgeList {
  readonly edges: Edge[] = [];
  readonly ends: number[] = [];
  private readonly into: Int32Array;

  constructor(private readonly calls: readonly CallInput[]) {
    this.into = new Int32Array(calls.length);
  }

  add(from: number, to: number, kind: EdgeKind, reason: string): void {
    if (this.into[from] === to + 1) return;
    this.into[from] = to + 1;
    this.edges.push({ from: (this.calls[from] as CallInput).id, to: (this.calls[to] as CallInput).id, kind, reason });
    this.ends.push(from, to);
  }

  /** Starts adding edges into `to` again; its edges so far come from its predecessors in `pred`. */
  reopen(to: number, pred: Adjacency): void {
    for (let k = pred.start[to] as number; k < (pred.start[to + 1] as number); k++) this.into[pred.list[k] as number] = to + 1;
  }
}

interface CheckContext {
  calls: readonly CallInput[];
  catalog: Catalog;
  byId: Map<string, number>;
  /** Tool name → the indexes of its calls (made on first use). */
  byTool: () => ReadonlyMap<string, readonly number[]>;
  policyOf: (m: ToolManifest) => CallPolicy;
  /** Where a reference that names a call becomes a data edge. */
  links: EdgeList;
}

function checkCall(c: CallInput, index: number, ctx: CheckContext): PlannedCall {
  const args = c.args ?? {};
  // Every field set from the start, optional ones too: fields added later go to a separate property
  // store, one more object per call (40 bytes, at 100k calls kept through the whole plan).
  const d: PlannedCall = {
    index,
    id: c.id,
    tool: c.tool,
    args,
    manifest: undefined,
    error: undefined,
    blockedBy: undefined,
    review: undefined,
    targets: NO_TARGETS,
    refCalls: NO_REFS,
    hasRefs: false,
    templated: false,
    access: PURE,
  };
  const manifest = ctx.catalog.get(c.tool);
  if (c.invalid !== undefined) {
    d.error = callError('invalid_args', `${c.id}: ${c.invalid}`, { details: { tool: c.tool } });
    if (manifest) d.manifest = manifest;
  } else if (!manifest) {
    d.error = callError('unknown_tool', `${c.id}: no tool named ${c.tool} in the catalog`, { details: { tool: c.tool } });
  } else {
    d.manifest = manifest;
    const cp = ctx.policyOf(manifest);
    if (cp.deny !== undefined) d.error = callError('policy_denied', `${c.id}: ${cp.deny}`, { details: { tool: c.tool } });
    else if (cp.review !== undefined) d.review = cp.review;
  }

  // Most args hold no template at all: one walk that allocates nothing tells (and is reused below).
  const templated = hasTemplates(args);
  d.templated = templated;
  const found = templated ? findReferences(args) : NOTHING_FOUND;
  d.hasRefs = found.refs.length > 0;
  if (!d.error && found.malformed.length > 0) {
    d.error = callError('unresolved_reference', `${c.id}: malformed reference ${found.malformed[0]}`, {
      details: { reference: found.malformed[0] },
    });
  }
  if (d.hasRefs) {
    const targets = new Map<string, string>();
    d.targets = targets;
    d.refCalls = found.refs.map((ref) => resolveTarget(d, targets, ref, ctx));
  }

  if (manifest && !d.error) {
    d.access = accessOf(manifest, args);
    if (!d.hasRefs) {
      const problem = checkResolvedArgs(ctx.catalog, c.tool, args, templated);
      if (problem) d.error = callError('invalid_args', `${c.id}: ${problem}`, { details: { tool: c.tool } });
    }
  }
  return d;
}

/**
 * Args with no references still need `$${` escapes undone before the schema sees them. (`templated`:
 * whether they hold any `${`, when the caller knows.)
 */
export function checkResolvedArgs(catalog: Catalog, tool: string, args: unknown, templated = hasTemplates(args)): string | null {
  const value = templated ? resolveValue(args, () => undefined) : { ok: true as const, value: args };
  if (!value.ok) return value.error.message;
  return catalog.checkArgs(tool, value.value);
}

/**
 * The call that a reference of `d` names, by id or by the name of a tool used once, with its data edge;
 * or -1, and `d` fails (`self`, an ambiguous tool name, a name of nothing). The index is the one the
 * run finds the call by: the last call with that id.
 */
function resolveTarget(d: PlannedCall, targets: Map<string, string>, ref: Reference, ctx: CheckContext): number {
  const known = targets.get(ref.target);
  if (known !== undefined) return ctx.byId.get(known) as number;
  if (ref.target === 'self') {
    d.error ??= callError('unresolved_reference', `${d.id}: ${ref.raw} — self is only known to compensations`);
    return -1;
  }
  const byId = ctx.byId.get(ref.target);
  if (byId !== undefined) return refersTo(d, targets, ref.target, byId, ctx);
  const users = ctx.byTool().get(ref.target) ?? [];
  if (users.length === 1) return refersTo(d, targets, ref.target, users[0] as number, ctx);
  if (users.length > 1) {
    d.error ??= callError(
      'ambiguous_reference',
      `${d.id}: ${ref.raw} — ${users.length} calls use the tool ${ref.target}; refer to one by its call id`,
      {
        details: { reference: ref.raw, calls: users.map((u) => idAt(ctx, u)) },
      },
    );
  } else {
    d.error ??= callError('unresolved_reference', `${d.id}: ${ref.raw} names no call of the run`, { details: { reference: ref.raw } });
  }
  return -1;
}

/** `d` refers to call `from` by `target` (its id, or the name of its tool): a data edge. */
function refersTo(d: PlannedCall, targets: Map<string, string>, target: string, from: number, ctx: CheckContext): number {
  const id = idAt(ctx, from);
  targets.set(target, id);
  ctx.links.add(from, d.index, 'data', dataReason(d.id, target));
  return id === target ? from : (ctx.byId.get(id) as number);
}

/** `targets` and `refCalls` of the calls without references (shared: never changed). */
const NO_TARGETS: ReadonlyMap<string, string> = new Map();
const NO_REFS: number[] = Object.freeze([]) as unknown as number[];
/** What `findReferences` finds in args without a `${` (shared, so frozen). */
const NOTHING_FOUND: FoundReferences = Object.freeze({
  refs: Object.freeze([]) as unknown as Reference[],
  malformed: Object.freeze([]) as unknown as string[],
});

/**
 * The reason of a data edge: `b uses ${a.output}`. Joined into one flat string: a template literal
 * makes a chain of three cons strings, twice the memory for what is the most numerous string of a
 * plan, to be flattened anyway when the edge is serialized.
 */
export function dataReason(id: string, target: string): string {
  return [id, ' uses ${', target, '.output}'].join('');
}

function idAt(ctx: CheckContext, index: number): string {
  return (ctx.calls[index] as CallInput).id;
}

function addOrderings(d: PlannedCall, orderings: Ordering[], verb: 'after' | 'requires', ctx: CheckContext): void {
  for (const o of orderings) {
    let matched = 0;
    for (const [tool, users] of ctx.byTool()) {
      if (!globMatch(o.pattern, tool)) continue;
      for (const u of users) {
        if (u === d.index) continue;
        matched++;
        ctx.links.add(u, d.index, 'policy', `${o.source}: ${d.tool} ${verb} ${tool}`);
      }
    }
    if (verb === 'requires' && matched === 0 && !d.error) d.error = missingRequired(d, o);
  }
}

function descendants(roots: number[], { start, list }: Adjacency): Set<number> {
  const out = new Set(roots);
  const stack = [...roots];
  while (stack.length > 0) {
    const v = stack.pop() as number;
    for (let k = start[v] as number; k < (start[v + 1] as number); k++) {
      const w = list[k] as number;
      if (!out.has(w)) {
        out.add(w);
        stack.push(w);
      }
    }
  }
  return out;
}

/** Tool name → the indexes of its calls, ascending; tools in the order of their first call. */
function toolIndex(calls: readonly CallInput[]): Map<string, number[]> {
  const byTool = new Map<string, number[]>();
  for (let i = 0; i < calls.length; i++) {
    const tool = (calls[i] as CallInput).tool;
    const list = byTool.get(tool);
    if (list) list.push(i);
    else byTool.set(tool, [i]);
  }
  return byTool;
}

// ---- one call at a time (a streamed run) -----------------------------------------------------------

/** The calls a plan is made for, indexed as `buildPlan` indexes them (see `planCall`). */
export interface CallIndex {
  calls: readonly CallInput[];
  /** Call id → index (the last call with that id). */
  byId: ReadonlyMap<string, number>;
  /** Tool name → the indexes of its calls, ascending; tools in the order of their first call. */
  byTool: ReadonlyMap<string, readonly number[]>;
}

/** Where `planCall` sends data edges: nowhere (it plans no edges; `add` is all `checkCall` uses). */
const NO_LINKS = { add() {} } as unknown as EdgeList;

/**
 * The plan of the call at `index` exactly as `buildPlan` over `at.calls` makes it, before cycles are
 * looked for (`blockedBy` is never set): its checks, the calls its references name, its resources,
 * and whether each `requires` finds a call. It depends on the call and on which ids and tool names
 * `at` holds, not on the other calls' plans, so a streamed run plans each call as it arrives in time
 * proportional to the call, not to the run. `policyOf` must give `policyFor(m, tenant, policy)`.
 */
export function planCall(index: number, at: CallIndex, catalog: Catalog, policyOf: (m: ToolManifest) => CallPolicy): PlannedCall {
  const ctx: CheckContext = {
    calls: at.calls,
    catalog,
    byId: at.byId as Map<string, number>,
    byTool: () => at.byTool,
    policyOf,
    links: NO_LINKS,
  };
  const d = checkCall(at.calls[index] as CallInput, index, ctx);
  if (d.manifest && !d.error) {
    // As `addOrderings` does for `requires`: the first ordering that matches no other call fails it
    // (the same error; only whether one matches is looked for, once per distinct tool).
    for (const o of policyOf(d.manifest).requires) {
      if (d.error || hasOtherCall(o.pattern, index, at.byTool)) continue;
      d.error = missingRequired(d, o);
    }
  }
  return d;
}

/** The error of a call whose `requires` ordering `o` matches no other call of the run. */
function missingRequired(d: PlannedCall, o: Ordering): CallError {
  return callError('missing_required_predecessor', `${d.id}: ${o.source} requires a call of ${o.pattern} in the run, and there is none`, {
    details: { requires: o.pattern },
  });
}

/** Whether a call other than `index` uses a tool that `pattern` matches. */
function hasOtherCall(pattern: string, index: number, byTool: ReadonlyMap<string, readonly number[]>): boolean {
  for (const [tool, users] of byTool) {
    if (globMatch(pattern, tool) && (users.length > 1 || users[0] !== index)) return true;
  }
  return false;
}
