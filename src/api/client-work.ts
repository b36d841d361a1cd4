/**
 * Client-run tools at the API (DESIGN §17): the checks of `POST /v1/runs/{id}/calls/{callId}/result`
 * that need no owner (the call exists, its tool is a client tool), the `409 stale_token` of a token no
 * attempt waits for, and what an accepted result answers.
 */
import type { Catalog } from '../core/tool.js';
import type { RunView } from '../core/view.js';
import { isClientTool } from '../executors/client.js';
import { ApiError } from './errors.js';

/** The answer of an accepted result: the attempt it ended. */
export interface ResultTaken {
  runId: string;
  callId: string;
  attempt: number;
}

/** 404 for a call the run lacks; 409 for a call whose tool its agent does not run. */
export function checkClientCall(view: RunView, callId: string, catalog: Catalog): void {
  const call = view.calls.find((c) => c.id === callId);
  if (!call) throw new ApiError('not_found', `run ${view.id} has no call ${callId}`);
  const tool = catalog.get(call.tool);
  if (!isClientTool(tool))
    throw new ApiError('conflict', `call ${callId} of run ${view.id} runs ${call.tool}, which is not a client tool: no agent answers it`);
}

export function staleToken(runId: string, callId: string): ApiError {
  return new ApiError(
    'stale_token',
    `no attempt of call ${callId} of run ${runId} waits for this token (a wrong token, an earlier attempt's, or one that timed out, was cancelled or was taken over); nothing was changed`,
  );
}
