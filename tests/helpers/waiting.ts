/**
 * The setting of the tests of why calls wait (issue #21) over the API, on one process or on several
 * replicas: http tools on a real tool server that hold their requests until the test answers them
 * (a `file:*` reader, a writer of `file:{path}`, a tool with a limit of 1, a rate-limited builtin),
 * and keys of two agent tenants and an operator.
 */
import type { Api } from './server.js';
import type { ToolServer } from './toolserver.js';

export const ACME = 'agent-acme-key';
export const GLOBEX = 'agent-globex-key';
export const OPS = 'operator-key';
/** An ISO-8601 time as the API gives it. */
export const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** The config; `moreTools` (YAML list items) join the tools, `more` (top-level YAML) goes at the end. */
export function waitingYaml(ts: ToolServer, moreTools = '', more = ''): string {
  return `tools:
  - name: run_tests
    input: { type: object }
    reads: ["file:*"]
    writes: []
    risk: read
    executor: { kind: http, url: "${ts.url('/tests')}" }
  - name: write_file
    input: { type: object, properties: { path: { type: string } }, required: [path] }
    reads: []
    writes: ["file:{path}"]
    risk: write
    executor: { kind: http, url: "${ts.url('/write')}" }
  - name: deploy
    input: { type: object }
    reads: []
    writes: []
    risk: write
    concurrency: 1
    executor: { kind: http, url: "${ts.url('/deploy')}" }
  - name: notify
    input: { type: object }
    reads: []
    writes: []
    risk: read
    rate: 1/min
    executor: { kind: builtin, name: echo }
${moreTools}auth:
  keys:
    - { key: "${ACME}", tenant: acme, role: agent }
    - { key: "${GLOBEX}", tenant: globex, role: agent }
    - { key: "${OPS}", tenant: ops, role: operator }
${more}`;
}

/** Submits `calls` as `token`'s tenant; the run as the answer (201) gives it. */
export async function submitAs(api: Api, token: string, calls: unknown[]): Promise<{ id: string; calls: any[] }> {
  const res = await api.post('/v1/runs', { calls }, { token });
  if (res.status !== 201) throw new Error(`submit answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body as { id: string; calls: any[] };
}

/** One call of a run as `token` sees it (an operator's by default). */
export async function callOf(api: Api, runId: string, callId: string, token = OPS): Promise<any> {
  return ((await api.get(`/v1/runs/${runId}`, { token })).body.calls as any[]).find((c) => c.id === callId);
}
