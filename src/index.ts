/**
 * toolgraph as a library: embed the scheduler in a Node agent backend.
 *
 * @example
 * import { createEngine } from 'toolgraph';
 * const engine = createEngine();                       // the demo catalog; or { config: 'toolgraph.yaml' }
 * const run = await engine.submit({ calls: [{ id: 'a', tool: 'echo', args: { x: 1 } }] });
 * const result = await engine.wait(run.id);            // calls in submission order
 */
import { loadConfig } from './config/load.js';
import type { Config } from './config/types.js';
import { Engine, type EngineOptions } from './engine/engine.js';

export interface CreateEngineOptions extends Omit<EngineOptions, 'config'> {
  /** A loaded config, or the path of a YAML/JSON config file; default: the demo catalog. */
  config?: Config | string;
}

export function createEngine(opts: CreateEngineOptions = {}): Engine {
  const config = typeof opts.config === 'object' ? opts.config : loadConfig(opts.config);
  return new Engine({ ...opts, config });
}

export { Engine } from './engine/engine.js';
export type { EngineOptions, EventSink, RunListener } from './engine/engine.js';
export type { SubmitRequest } from './contract/submission.js';
export { loadConfig, parseConfig, ConfigError } from './config/load.js';
export type { Config } from './config/types.js';
export { buildPlan } from './core/plan.js';
export { Scheduler, SchedulerError } from './core/scheduler.js';
export { Simulation } from './core/simulation.js';
export type { RunView, CallView, GraphView, WorkItem } from './core/view.js';
export { modelNames, safeModelName, toolOfModelName, MODEL_TOOL_NAME_RE, type ModelNames } from './contract/model-names.js';
export type { ClientAnswer, AnswerOutcome } from './executors/client.js';
export type { RunEvent, CoreEvent, EventType } from './core/events.js';
export type { CallInput, CallStatus, RunStatus, Edge, Diagnostic } from './core/calls.js';
export type { CallError, CallErrorCode } from './core/errors.js';
export type { ToolManifest, FailureMode } from './core/tool.js';
export { startTracing, tracingFromEnv, tracingOptionsFromEnv, TracingConfigError } from './telemetry/index.js';
export type { Tracing, TracingOptions, OtlpProtocol } from './telemetry/index.js';
