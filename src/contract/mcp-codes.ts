/**
 * The JSON-RPC error code that toolgraph's MCP connection gives, in the implementation-defined range,
 * to an answer it dropped for its size (src/mcp/frames.ts): past the server's `maxOutputBytes`, so the
 * executor (src/executors/mcp.ts) fails the call `output_too_large`, as any output past its cap does.
 */
export const OUTPUT_TOO_LARGE_RPC = -32099;
