/**
 * `toolgraph run BATCH.json [--config FILE] [--failure MODE] [--priority N] [--json] [--record OUT.json] [--approve]`
 *
 * Runs a batch in process, no server: live progress on a terminal (plain lines otherwise) on stderr,
 * then a results table in submission order (or, with --json, the run as the API shows it) on stdout.
 * There is no reviewer in process: calls that wait for review are rejected, or approved with --approve.
 * With an OTLP endpoint in the environment it exports traces like `serve` (DESIGN §15), under the
 * `TRACEPARENT` of the environment if there is one. `--priority` (else the batch file's `priority`) is
 * the run's priority (DESIGN §4), as recorded in its `run.created`.
 */
import { writeFileSync } from 'node:fs';
import type { RunEvent } from '../core/events.js';
import type { RunView } from '../core/view.js';
import { FailureSchema } from '../contract/batch.js';
import { Engine } from '../engine/engine.js';
import { recordingOf } from '../replay/recording.js';
import { tracingFromEnv, TracingConfigError } from '../telemetry/index.js';
import { PrioritySchema, readBatch, readConfig, UsageError } from './input.js';
import { parseOptions, type Io } from './options.js';
import { startCliMcp } from './mcp.js';
import { progressLine, Progress, resultsTable } from './progress.js';

export async function runCommand(args: string[], io: Io): Promise<number> {
  const { values, positionals } = parseOptions(args, {
    config: { type: 'string' },
    failure: { type: 'string' },
    priority: { type: 'string' },
    json: { type: 'boolean', default: false },
    record: { type: 'string' },
    approve: { type: 'boolean', default: false },
  });
  if (positionals.length !== 1) throw new UsageError('run takes exactly one BATCH.json');
  const flag = FailureSchema.optional().safeParse(values.failure);
  if (!flag.success) throw new UsageError(`--failure must be fail_fast, partial or replan, got "${String(values.failure)}"`);
  const level = values.priority === undefined ? undefined : PrioritySchema.safeParse(Number(values.priority));
  if (level && !level.success) throw new UsageError(`--priority must be 1 (most urgent) to 5, got "${String(values.priority)}"`);
  const fileConfig = readConfig(values.config as string | undefined);
  const batch = readBatch(positionals[0] as string);
  const failure = flag.data ?? batch.failure;
  const priority = level?.data ?? batch.priority;
  const mcp = await startCliMcp(fileConfig);
  const config = mcp.config;
  const events: RunEvent[] = [];
  const tracing = await tracingFromEnv(process.env).catch((e: unknown) => {
    throw e instanceof TracingConfigError ? new UsageError(e.message) : e;
  });
  const engine = new Engine({
    config,
    // No agent answers client tools here (DESIGN §17): their calls fail at once, naming the tool.
    clients: false,
    sink: { append: (es) => void events.push(...es) },
    ...(mcp.executor ? { executor: mcp.executor } : {}),
    ...(tracing ? { instrument: tracing.instrument } : {}),
  });
  tracing?.attach(engine);
  const runId = tracing && process.env.TRACEPARENT ? tracing.continueTrace(process.env.TRACEPARENT) : undefined;
  const progress = new Progress(io);
  engine.onEvent((e, view) => {
    if (e.type === 'call.awaiting_review' && e.callId) {
      const callId = e.callId;
      queueMicrotask(() =>
        engine
          .review({
            runId: e.runId,
            callId,
            decision: values.approve ? 'approve' : 'reject',
            comment: values.approve ? 'approved by toolgraph run --approve' : 'no reviewer in toolgraph run (pass --approve to approve)',
          })
          .catch(() => {}),
      );
    }
    if (io.isTTY) progress.update(e, view);
    else {
      const line = progressLine(e, view);
      if (line) io.err(`${line}\n`);
    }
  });
  const started = await engine.submit({
    ...(runId !== undefined ? { runId } : {}),
    calls: batch.calls,
    tenant: batch.tenant ?? 'default',
    ...(failure ? { failure } : {}),
    ...(batch.tags ? { tags: batch.tags } : {}),
    ...(priority !== undefined ? { priority } : {}),
  });
  const view = (await engine.wait(started.id)) as RunView;
  progress.finish();
  await engine.close();
  await mcp.close();
  await tracing?.shutdown();
  if (values.record) writeFileSync(values.record as string, `${JSON.stringify(recordingOf(events, config), null, 2)}\n`);
  io.out(values.json ? `${JSON.stringify(view, null, 2)}\n` : resultsTable(view));
  return view.status === 'succeeded' ? 0 : 1;
}
