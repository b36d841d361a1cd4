/** The JSON shape of a plan (`POST /v1/plan`, `toolgraph plan`): the graph and its diagnostics. */
import type { CallStatus, Diagnostic, Edge } from '../core/calls.js';
import type { Plan } from '../core/plan.js';

export interface PlanView {
  graph: { nodes: { id: string; tool: string; status: CallStatus }[]; edges: Edge[]; generations: string[][] };
  nodes: { id: string; tool: string; status: CallStatus }[];
  edges: Edge[];
  generations: string[][];
  diagnostics: Diagnostic[];
}

export function planView(plan: Plan): PlanView {
  const nodes = plan.calls.map((c) => ({
    id: c.id,
    tool: c.tool,
    status: (c.error ? 'failed' : c.blockedBy ? 'blocked' : c.review ? 'awaiting_review' : 'pending') as CallStatus,
  }));
  const graph = { nodes, edges: plan.edges, generations: plan.generations };
  return { graph, nodes, edges: plan.edges, generations: plan.generations, diagnostics: plan.diagnostics };
}
