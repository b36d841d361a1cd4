/** The catalog, and invoking one tool directly under the same limits and policy (DESIGN §7). */
import type { FastifyInstance } from 'fastify';
import { InvokeBodySchema, ToolNameParams } from '../../contract/requests.js';
import { tenantFor } from '../auth.js';
import type { AppContext } from '../context.js';
import { ApiError } from '../errors.js';
import { parseRequestPart } from '../request-part.js';
import { catalogModelNames, listedTool, modelTools, ToolsQuery } from '../tool-list.js';

export function toolRoutes(app: FastifyInstance, ctx: AppContext): void {
  const { service } = ctx;

  app.get('/v1/tools', async (req) => {
    const { format } = parseRequestPart(ToolsQuery, req.query ?? {}, 'query');
    const tools = service.config.catalog.list();
    return format
      ? modelTools(tools, format, catalogModelNames(service.config.catalog))
      : { items: tools.map((t) => listedTool(t, service.config.source)) };
  });

  app.post('/v1/tools/:name/invoke', async (req) => {
    if (ctx.shuttingDown()) throw new ApiError('shutting_down', 'the server is shutting down');
    const { name } = parseRequestPart(ToolNameParams, req.params, 'path');
    const tool = service.config.catalog.get(name);
    if (!tool) throw new ApiError('not_found', `no tool named ${name} in the catalog`);
    const body = parseRequestPart(InvokeBodySchema, req.body ?? {}, 'body');
    const started = Date.now();
    const { run } = await service.submitGrouped(req.principal, {
      tenant: tenantFor(req.principal, body.tenant),
      calls: [{ id: 'invoke', tool: name, args: body.args }],
      tags: { invoke: name },
    });
    const budget = Math.min(10 * 60_000, tool.timeoutMs * (tool.retry?.attempts ?? 1) + (tool.retry?.maxBackoffMs ?? 0) * 2 + 1000);
    // A call that waits for a human review is answered at once (status awaiting_review, with the
    // runId to follow it), rather than holding the request until the time budget runs out.
    const view = await service.wait(req.principal, run.id, budget, (v) => v.calls[0]?.status === 'awaiting_review');
    const call = view.calls[0];
    return {
      runId: view.id,
      status: call?.status,
      output: call?.status === 'succeeded' ? call.output : null,
      error: call?.error ?? call?.blockedBy ?? null,
      durationMs: Date.now() - started,
    };
  });
}
