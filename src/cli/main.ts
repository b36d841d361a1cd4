/**
 * `toolgraph` — the command line (DESIGN §9). `main(argv)` returns the exit code: 0 success, 1 a run
 * that did not succeed or a plan with diagnostics, 2 bad input (with a message naming the file and the
 * problem, never a stack trace).
 */
import { planCommand } from './plan.js';
import { runCommand } from './run.js';
import { UsageError } from './input.js';
import { defaultIo, type Io } from './options.js';

export type { Io };

const USAGE = `toolgraph — run an LLM agent's tool calls safely in parallel

Usage:
  toolgraph serve  [--config FILE] [--host H] [--port N] [--db FILE]
  toolgraph plan   BATCH.json [--config FILE] [--format json|mermaid|dot]
  toolgraph run    BATCH.json [--config FILE] [--failure MODE] [--priority N] [--json] [--record OUT.json] [--approve]
  toolgraph replay REC.json|DIR... [--config FILE] [--tolerance MS] [--json] [--junit OUT.xml]
  toolgraph bench  [--quick] [--out FILE]
  toolgraph tools  [--config FILE] [--format table|json|openai|anthropic]
  toolgraph mcp    [--config FILE] [--db FILE] [--port N]   (an MCP server on stdio; TOOLGRAPH_KEY with auth.keys)

Without --config, a demo catalog of builtin tools is used.`;

type Command = (args: string[], io: Io) => Promise<number>;

async function loadCommand(module: string, name: string): Promise<Command> {
  const m = (await import(module)) as Record<string, Command>;
  return m[name] as Command;
}

const COMMANDS: Record<string, () => Promise<Command>> = {
  plan: async () => planCommand,
  run: async () => runCommand,
  serve: () => loadCommand('./serve.js', 'serveCommand'),
  replay: () => loadCommand('./replay.js', 'replayCommand'),
  bench: () => loadCommand('./bench.js', 'benchCommand'),
  tools: () => loadCommand('./tools.js', 'toolsCommand'),
  mcp: () => loadCommand('./mcp-stdio.js', 'mcpCommand'),
};

export async function main(argv: string[], io: Io = defaultIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    io.out(`${USAGE}\n`);
    return name === undefined ? 2 : 0;
  }
  const load = COMMANDS[name];
  if (!load) {
    io.err(`toolgraph: unknown command "${name}"\n\n${USAGE}\n`);
    return 2;
  }
  try {
    return await (await load())(rest, io);
  } catch (e) {
    if (e instanceof UsageError) {
      io.err(`toolgraph ${name}: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
}
