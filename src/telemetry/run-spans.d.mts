/** See run-spans.mjs. */
export declare const RUN_SPAN: 'toolgraph.run';
export declare const LIMIT_WAIT_EVENT: 'toolgraph.limit_wait';
export declare const EXECUTE_TOOL: 'execute_tool';
export declare const ATTR: {
  readonly runId: 'toolgraph.run.id';
  readonly tenant: 'toolgraph.tenant';
  readonly runStatus: 'toolgraph.run.status';
  readonly attempt: 'toolgraph.attempt';
  readonly waitMs: 'toolgraph.wait_ms';
  readonly compensation: 'toolgraph.compensation';
  readonly replanned: 'toolgraph.run.replanned';
  readonly operation: 'gen_ai.operation.name';
  readonly toolName: 'gen_ai.tool.name';
  readonly toolCallId: 'gen_ai.tool.call.id';
  readonly errorType: 'error.type';
};
export declare const OP: {
  readonly CREATED: 0;
  readonly READY: 1;
  readonly STARTED: 2;
  readonly SUCCEEDED: 3;
  readonly ENDED: 4;
  readonly COMPENSATED: 5;
  readonly COMPLETED: 6;
  readonly REPLANNED: 7;
  readonly ATTEMPT: 8;
  readonly PARENT: 9;
  readonly FORGET: 10;
  readonly NAME: 11;
};
/** See run-spans.mjs: the bookkeeping the feed and `RunSpans` share. */
export declare function sweepPending(pending: Map<string, number>, runs: Map<string, unknown>, now: number): void;
export declare function awaitReplan(awaiting: Map<string, true>, runs: Map<string, unknown>, runId: string): void;

/** An entry's values: op codes, ids, times, counts, names. */
export type EntryValue = string | number;

export interface ParsedTraceparent {
  traceId: string;
  spanId: string;
  flags: number;
}
export declare function parseTraceparent(text: string): ParsedTraceparent | undefined;
export declare function runTraceId(runId: string): string;

export declare class SpanIds {
  next(): string;
}

/** A span once it ended: times in epoch milliseconds; status code 0 (unset) or 2 (error). */
export interface EndedSpan {
  name: string;
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  parentRemote: boolean;
  parentFlags: number;
  start: number;
  end: number;
  attributes: Record<string, string | number | boolean>;
  status: { code: 0 } | { code: 2; message: string };
  events: { name: string; at: number; attributes: Record<string, string | number | boolean> }[];
  links: { traceId: string; spanId: string; flags: number; remote: boolean }[];
}

export declare class RunSpans {
  constructor(emit: (span: EndedSpan) => void, ids?: SpanIds, now?: () => number);
  /** Spans let go unended (a FORGET entry) since the caller last zeroed it. */
  dropped: number;
  readonly size: number;
  /**
   * Reads the entries of `q` from `from` on (whole entries; throws on one it cannot read), their
   * times counted from `base` (epoch ms).
   */
  apply(q: readonly EntryValue[], base?: number, from?: number): void;
}
