/** Hooks (DESIGN §14): the runner the engine calls them through. */
export { createHookRunner, readAnswer, type HookPayload, type HookRunner, type HookRunnerOptions } from './runner.js';
