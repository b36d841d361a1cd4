/** Text renderings of a graph: Mermaid and Graphviz DOT (for `toolgraph plan --format` and the API). */
import type { CallStatus, Edge } from './calls.js';

export interface RenderableGraph {
  nodes: { id: string; tool: string; status: CallStatus }[];
  edges: Edge[];
}

const MERMAID_ARROW = { data: '-->', policy: '-.->', conflict: '==>' } as const;
const DOT_STYLE = { data: 'solid', policy: 'dashed', conflict: 'bold' } as const;

function mermaidId(i: number): string {
  return `n${i}`;
}

function mermaidText(s: string): string {
  return s.replace(/"/g, '#quot;').replace(/[<>]/g, (c) => (c === '<' ? '#lt;' : '#gt;'));
}

export function toMermaid(g: RenderableGraph): string {
  const index = new Map(g.nodes.map((n, i) => [n.id, i]));
  const lines = ['flowchart TD'];
  g.nodes.forEach((n, i) => {
    lines.push(`  ${mermaidId(i)}["${mermaidText(`${n.id}: ${n.tool} (${n.status})`)}"]`);
  });
  for (const e of g.edges) {
    lines.push(
      `  ${mermaidId(index.get(e.from) as number)} ${MERMAID_ARROW[e.kind]}|"${mermaidText(`${e.kind}: ${e.reason}`)}"| ${mermaidId(index.get(e.to) as number)}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

function dotString(s: string): string {
  return `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

export function toDot(g: RenderableGraph): string {
  const lines = ['digraph toolgraph {', '  rankdir=TB;', '  node [shape=box];'];
  for (const n of g.nodes) lines.push(`  ${dotString(n.id)} [label=${dotString(`${n.id}\n${n.tool}\n${n.status}`)}];`);
  for (const e of g.edges) {
    lines.push(
      `  ${dotString(e.from)} -> ${dotString(e.to)} [style=${DOT_STYLE[e.kind]}, label=${dotString(e.kind)}, tooltip=${dotString(e.reason)}];`,
    );
  }
  lines.push('}');
  return `${lines.join('\n')}\n`;
}
