/** A plain, readable API reference at `/docs`, rendered from the OpenAPI document (no script needed). */

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

interface Operation {
  summary?: string;
  description?: string;
  parameters?: { name: string; in: string; schema?: unknown }[];
  requestBody?: { content: Record<string, { schema: unknown }> };
  responses: Record<string, { description: string; content?: Record<string, { schema: unknown }> }>;
}

export function docsPage(doc: Record<string, unknown>): string {
  const paths = doc.paths as Record<string, Record<string, Operation>>;
  const info = doc.info as { title: string; description: string };
  const sections: string[] = [];
  const toc: string[] = [];
  for (const [path, ops] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const anchor = `${method}-${path}`.replace(/[^a-z0-9]+/gi, '-');
      toc.push(`<li><a href="#${anchor}"><code>${method.toUpperCase()} ${esc(path)}</code></a> — ${esc(op.summary ?? '')}</li>`);
      const params = (op.parameters ?? []).map((p) => `<li><code>${esc(p.name)}</code> (${p.in}) <code>${esc(JSON.stringify(p.schema ?? {}))}</code></li>`).join('');
      const body = op.requestBody ? `<h4>Body</h4><pre>${esc(JSON.stringify(Object.values(op.requestBody.content)[0]?.schema, null, 2))}</pre>` : '';
      const responses = Object.entries(op.responses)
        .map(([code, r]) => `<li><strong>${code}</strong> ${esc(r.description)}</li>`)
        .join('');
      sections.push(
        `<section id="${anchor}"><h3><code>${method.toUpperCase()} ${esc(path)}</code></h3><p>${esc(op.summary ?? '')}</p>${op.description ? `<p>${esc(op.description)}</p>` : ''}` +
          `${params ? `<h4>Parameters</h4><ul>${params}</ul>` : ''}${body}<h4>Responses</h4><ul>${responses}</ul></section>`,
      );
    }
  }
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(info.title)} API</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#111}pre{background:#f4f4f4;padding:.75rem;overflow:auto;max-height:24rem}section{border-top:1px solid #ccc;margin-top:1.5rem}code{font-size:.95em}</style>
</head><body><h1>${esc(info.title)} API v1</h1><p>${esc(info.description)}</p>
<p>Authenticate with <code>Authorization: Bearer &lt;key&gt;</code> when the server has keys. Every error is <code>{"error":{"code","message","details"?}}</code>. The machine-readable document is at <a href="/openapi.json">/openapi.json</a>.</p>
<h2>Endpoints</h2><ul>${toc.join('')}</ul>${sections.join('')}</body></html>`;
}
