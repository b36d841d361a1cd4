/**
 * The OpenAPI 3.1 document, generated from the same zod schemas that validate requests, with response
 * schemas written in zod too. `/openapi.json` serves it; `openapi.yaml` at the repo root is the same
 * document as YAML (`npm run openapi` writes it; a test checks that the two agree).
 */
import { z } from 'zod';
import { CALL_ERROR_CODES } from '../core/errors.js';
import {
  AppendBodySchema,
  ClientResultBodySchema,
  GraphQuery,
  InvokeBodySchema,
  ListRunsQuery,
  MessagesQuery,
  PlanBodySchema,
  ReplanBodySchema,
  ReviewBodySchema,
  ReviewsQuery,
  SubmitBodySchema,
  WorkQuery,
} from '../contract/requests.js';
import { ToolsQuery } from './tool-list.js';
import {
  ErrorBodySchema,
  EventSchema,
  GraphSchema,
  InvokedSchema,
  LimitsSchema,
  PlanSchema,
  ReplicasSchema,
  ReviewSchema,
  RunSchema,
  RunSummarySchema,
  ResultTakenSchema,
  WorkListSchema,
} from '../contract/responses.js';

type Schema = z.ZodType;

const ToolList = z.object({
  items: z.array(
    z
      .object({
        name: z.string(),
        description: z.string().optional(),
        input: z.record(z.string(), z.unknown()).optional(),
        executor: z.object({ kind: z.enum(['builtin', 'http', 'worker', 'mcp', 'client']) }).loose(),
        source: z.string().describe('config, builtin (the demo catalog) or mcp:<server>'),
      })
      .loose(),
  ),
});
const ModelToolList = z.object({
  tools: z.array(z.record(z.string(), z.unknown())).describe('OpenAI function tools or Anthropic tools'),
  skipped: z
    .array(z.object({ name: z.string(), reason: z.string() }))
    .describe('tools left out: none (every tool is exported, renamed if need be)'),
  renamed: z
    .array(z.object({ name: z.string(), exported: z.string() }))
    .describe(
      'tools whose names the vendor refuses (a dot, say), exported under a vendor-safe name: a model call of `exported` (POST /v1/runs with openai or anthropic) runs `name`',
    ),
});

function json(schema: Schema): Record<string, unknown> {
  return z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
}

function content(schema: Schema) {
  return { 'application/json': { schema: json(schema) } };
}

function errors(...codes: number[]) {
  return Object.fromEntries(codes.map((c) => [String(c), { description: 'Error', content: content(ErrorBodySchema) }]));
}

function params(names: string[]) {
  return names.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } }));
}

/** Query parameters from a zod object schema. */
function query(schema: z.ZodObject) {
  const s = json(schema) as { properties: Record<string, unknown> };
  return Object.entries(s.properties).map(([name, sch]) => ({ name, in: 'query', required: false, schema: sch }));
}

const idempotencyHeader = { name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', maxLength: 255 } };
const traceparentHeader = {
  name: 'traceparent',
  in: 'header',
  required: false,
  description: 'W3C Trace Context: with traces on (OTEL_EXPORTER_OTLP_ENDPOINT), the run span is a child of this span',
  schema: { type: 'string' },
};
const lastEventId = { name: 'Last-Event-ID', in: 'header', required: false, schema: { type: 'string' } };

let cached: Record<string, unknown> | undefined;

/** The document (built once: generating the JSON Schemas takes a while). */
export function openApiDocument(): Record<string, unknown> {
  cached ??= buildDocument();
  return cached;
}

function buildDocument(): Record<string, unknown> {
  const runResp = (status: string, description: string) => ({ [status]: { description, content: content(RunSchema) } });
  const paths: Record<string, unknown> = {
    '/v1/runs': {
      post: {
        summary: 'Submit a batch of tool calls',
        description:
          'Plans the batch into a graph and runs it. With waitMs the response waits until the run ends or that time passes. With a concurrencyKey, onConcurrent says what to do when an earlier unfinished run of the tenant has the same key: queue (default; the run is created `queued` and starts once they have ended), cancel_running (they are cancelled, their calls `superseded` naming the new run) or reject (409 concurrent_run, details.runId naming the run that holds the key).',
        parameters: [idempotencyHeader, traceparentHeader],
        requestBody: { required: true, content: content(SubmitBodySchema) },
        responses: {
          ...runResp('201', 'The run, created'),
          ...runResp('200', 'The run an earlier request with the same Idempotency-Key created'),
          ...errors(400, 401, 403, 409, 413, 415, 429),
        },
      },
      get: {
        summary: 'List runs, newest first',
        parameters: query(ListRunsQuery),
        responses: {
          '200': {
            description: 'A page of runs',
            content: content(z.object({ items: z.array(RunSummarySchema), nextCursor: z.string().nullable() })),
          },
          ...errors(400, 401, 403),
        },
      },
    },
    '/v1/plan': {
      post: {
        summary: 'Plan a batch: the graph and its diagnostics, nothing run',
        requestBody: { required: true, content: content(PlanBodySchema) },
        responses: { '200': { description: 'The plan', content: content(PlanSchema) }, ...errors(400, 401, 403) },
      },
    },
    '/v1/runs/{id}': {
      get: {
        summary: 'A run, its calls in submission order',
        parameters: params(['id']),
        responses: { ...runResp('200', 'The run'), ...errors(401, 404) },
      },
    },
    '/v1/runs/{id}/graph': {
      get: {
        summary: "A run's graph (JSON, or Mermaid/DOT text)",
        parameters: [...params(['id']), ...query(GraphQuery)],
        responses: {
          '200': { description: 'The graph', content: { ...content(GraphSchema), 'text/plain': { schema: { type: 'string' } } } },
          ...errors(400, 401, 404),
        },
      },
    },
    '/v1/runs/{id}/events': {
      get: {
        summary: "A run's events as Server-Sent Events",
        description:
          "Replays the stored events after Last-Event-ID (or ?from=N), then streams live ones until the run ends. Each event's `id:` is its seq and its data is the event JSON.",
        parameters: [
          ...params(['id']),
          { name: 'from', in: 'query', required: false, schema: { type: 'integer', minimum: 0 } },
          lastEventId,
        ],
        responses: {
          '200': { description: 'text/event-stream of events', content: { 'text/event-stream': { schema: json(EventSchema) } } },
          ...errors(400, 401, 404),
        },
      },
    },
    '/v1/runs/{id}/cancel': {
      post: { summary: 'Cancel a run', parameters: params(['id']), responses: { ...runResp('202', 'Cancelling'), ...errors(401, 404) } },
    },
    '/v1/runs/{id}/replan': {
      post: {
        summary: 'Append calls to a run that needs a replan',
        parameters: params(['id']),
        requestBody: { required: true, content: content(ReplanBodySchema) },
        responses: { ...runResp('202', 'Replanned'), ...errors(400, 401, 404, 409, 413) },
      },
    },
    '/v1/runs/{id}/calls': {
      post: {
        summary: 'Append calls to an open (streamed) run',
        description: 'Calls arrive in model order; each starts as soon as it is safe. 409 once the run is sealed.',
        parameters: params(['id']),
        requestBody: { required: true, content: content(AppendBodySchema) },
        responses: { ...runResp('200', 'The run'), ...errors(400, 401, 404, 409, 413) },
      },
    },
    '/v1/runs/{id}/seal': {
      post: {
        summary: 'Seal an open run: no more calls',
        parameters: params(['id']),
        responses: { ...runResp('200', 'The run'), ...errors(401, 404, 409) },
      },
    },
    '/v1/runs/{id}/work': {
      get: {
        summary: 'Calls of client tools that wait for their agent’s result',
        description:
          'The calls of `executor: { kind: client }` tools that have started and wait for their result, in call order, with their resolved args, attempt and token (the same token as their `call.started` event’s `data.dispatch`). With `waitMs`, the answer waits until one waits, the run ends, or that time passes. Read from the run’s events: any replica answers.',
        parameters: [...params(['id']), ...query(WorkQuery)],
        responses: { '200': { description: 'The waiting calls', content: content(WorkListSchema) }, ...errors(400, 401, 404) },
      },
    },
    '/v1/runs/{id}/calls/{callId}/result': {
      post: {
        summary: 'Answer a client tool’s call: its output, or an error',
        description:
          'Ends the waiting attempt whose token this is, as its executor would: the output is held to maxOutputBytes like any output (a larger one fails the call output_too_large), an error is a tool_error, retried (idempotent tools with retry) only when `retryable` is true. A token no attempt waits for (wrong, an earlier attempt’s, one that timed out, was cancelled or taken over) is 409 stale_token and changes nothing. Any replica takes it and carries it to the run’s owner.',
        parameters: params(['id', 'callId']),
        requestBody: { required: true, content: content(ClientResultBodySchema) },
        responses: {
          '202': { description: 'Taken: the attempt it ended', content: content(ResultTakenSchema) },
          ...errors(400, 401, 404, 409, 413, 503),
        },
      },
    },
    '/v1/runs/{id}/messages': {
      get: {
        summary: 'The messages to append to the conversation, in call order (OpenAI or Anthropic form)',
        parameters: [...params(['id']), ...query(MessagesQuery)],
        responses: {
          '200': { description: 'Messages', content: { 'application/json': { schema: { type: 'array' } } } },
          ...errors(400, 401, 404),
        },
      },
    },
    '/v1/stream': {
      get: {
        summary: 'Run-level changes of every run the key may see, as Server-Sent Events (the dashboard uses it)',
        parameters: [{ name: 'tenant', in: 'query', required: false, schema: { type: 'string' } }],
        responses: {
          '200': {
            description: 'text/event-stream of `run` and `counts` events',
            content: { 'text/event-stream': { schema: { type: 'string' } } },
          },
          ...errors(400, 401, 403),
        },
      },
    },
    '/v1/runs/{id}/recording': {
      get: {
        summary: "A run's recording (toolgraph.recording/v1)",
        parameters: params(['id']),
        responses: {
          '200': { description: 'The recording', content: { 'application/json': { schema: { type: 'object' } } } },
          ...errors(401, 404),
        },
      },
    },
    '/v1/reviews': {
      get: {
        summary: 'Calls waiting for (or decided by) a human',
        parameters: query(ReviewsQuery),
        responses: { '200': { description: 'Reviews', content: content(z.object({ items: z.array(ReviewSchema) })) }, ...errors(400, 401) },
      },
    },
    '/v1/reviews/{id}': {
      post: {
        summary: 'Decide a review: approve, reject, or edit the args',
        parameters: params(['id']),
        requestBody: { required: true, content: content(ReviewBodySchema) },
        responses: { ...runResp('200', 'The run after the decision'), ...errors(400, 401, 403, 404, 409) },
      },
    },
    '/v1/tools': {
      get: {
        summary: 'The tool catalog, or (with format) the tool definitions a model API takes',
        parameters: query(ToolsQuery),
        responses: { '200': { description: 'Tools', content: content(z.union([ToolList, ModelToolList])) }, ...errors(400, 401) },
      },
    },
    '/v1/tools/{name}/invoke': {
      post: {
        summary: 'Invoke one tool under the same limits and policy',
        parameters: params(['name']),
        requestBody: { required: false, content: content(InvokeBodySchema) },
        responses: { '200': { description: 'The outcome', content: content(InvokedSchema) }, ...errors(400, 401, 403, 404, 429) },
      },
    },
    '/v1/limits': {
      get: {
        summary: 'Every limit and lock in use: how full, who holds it, how many calls wait behind it and for how long (operator only)',
        description:
          "With several replicas on PostgreSQL, cluster-wide on any replica: holders and inUse from every live replica's running calls, waiting and longestWaitMs summed over live replicas; the global and perRun items are the answering replica's own. 503 when the database cannot be read.",
        responses: { '200': { description: 'Limits in use', content: content(LimitsSchema) }, ...errors(401, 403, 503) },
      },
    },
    '/v1/replicas': {
      get: {
        summary: 'The replicas serving this API, with their lease health and owned runs (operator only)',
        description:
          'With PostgreSQL: every replica that holds a lease, or held one in the last hour and did not leave cleanly (alive: false). With SQLite: this process alone, without a lease (the lease fields are null).',
        responses: { '200': { description: 'Replicas', content: content(ReplicasSchema) }, ...errors(401, 403, 503) },
      },
    },
    '/mcp': {
      post: {
        summary: 'The Model Context Protocol (Streamable HTTP): toolgraph as an MCP server',
        description:
          'A JSON-RPC message of MCP (initialize, tools/list, tools/call, notifications), answered as MCP says, in JSON or as ' +
          'Server-Sent Events. `initialize` answers with the session id in the `Mcp-Session-Id` header; every later request ' +
          'carries it. tools/list is the catalog plus toolgraph_batch; each tools/call is a run tagged `mcp.session`. ' +
          'See docs/mcp-server.md.',
        requestBody: { required: true, content: { 'application/json': { schema: { type: 'object' } } } },
        responses: {
          '200': { description: 'The JSON-RPC answer (application/json or text/event-stream)' },
          '202': { description: 'A notification or response, accepted' },
          ...errors(400, 401, 403, 406, 415),
        },
      },
      delete: {
        summary: 'Ends an MCP session (it holds nothing: 204)',
        responses: { '204': { description: 'Ended' }, ...errors(400, 401) },
      },
    },
    '/healthz': { get: { summary: 'Liveness', security: [], responses: { '200': { description: 'OK' } } } },
    '/metrics': {
      get: { summary: 'Prometheus metrics', security: [], responses: { '200': { description: 'Metrics in the Prometheus text format' } } },
    },
  };
  return {
    openapi: '3.1.0',
    info: {
      title: 'toolgraph',
      version: '1',
      description: `Runs an LLM agent's tool calls safely in parallel. Call error codes: ${CALL_ERROR_CODES.join(', ')}.`,
    },
    servers: [{ url: 'http://127.0.0.1:8080' }],
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: { Run: json(RunSchema), Error: json(ErrorBodySchema), Event: json(EventSchema) },
    },
    paths,
  };
}
