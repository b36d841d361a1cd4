/** The permit request the tests of slices share: run `r1` of tenant `acme`, tool `echo`, no resources. */
import type { PermitRequest } from '../../src/core/scheduler.js';

export function permitRequest(callId: string, o: Partial<PermitRequest> = {}): PermitRequest {
  return { runId: 'r1', callId, tenant: 'acme', tool: 'echo', domain: null, reads: [], writes: [], ...o };
}
