/**
 * `toolgraph serve` as a child process, for the bench's replicas and the tests: learn its port from
 * the "toolgraph serving http://HOST:PORT" line it prints to stderr, kill it (SIGKILL for crash
 * tests), or stop it. The child runs bin/toolgraph.mjs (dist/ when built).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../bin/toolgraph.mjs', import.meta.url));
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface ServerChild {
  proc: ChildProcess;
  url: string;
  port: number;
  /** Everything the child wrote to stderr and stdout so far (for failure messages). */
  output(): string;
  /** Resolves with the exit code (or signal) once the child has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL: the process dies at once, with no chance to drain or close anything. */
  kill9(): Promise<void>;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<void>;
}

export interface StartOptions {
  config: string;
  db: string;
  port?: number;
  /** `--drain-ms` for SIGTERM; default 0. */
  drainMs?: number;
  env?: Record<string, string>;
  /** How long to wait for the "serving" line; default 30 s (tsx compiles the sources on the first start). */
  startTimeoutMs?: number;
  /** More arguments of `serve` (`--replica-id r1`). */
  args?: string[];
  /** Options of node itself, before the script (worker threads inherit them, unlike NODE_OPTIONS). */
  nodeArgs?: string[];
}

/** Starts `node bin/toolgraph.mjs serve` and resolves once it listens. */
export function startServer(opts: StartOptions): Promise<ServerChild> {
  const args = [
    BIN,
    'serve',
    '--config',
    opts.config,
    '--db',
    opts.db,
    '--port',
    String(opts.port ?? 0),
    '--host',
    '127.0.0.1',
    '--drain-ms',
    String(opts.drainMs ?? 0),
    ...(opts.args ?? []),
  ];
  const proc = spawn(process.execPath, [...(opts.nodeArgs ?? []), ...args], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'warn', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    proc.once('exit', (code, signal) => resolve({ code, signal }));
  });
  proc.stdout?.setEncoding('utf8');
  proc.stderr?.setEncoding('utf8');
  proc.stdout?.on('data', (s: string) => (out += s));
  const timeoutMs = opts.startTimeoutMs ?? 30_000;
  return new Promise<ServerChild>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(
      () => fail(new Error(`the server did not report its port within ${timeoutMs} ms; output:\n${out}`)),
      timeoutMs,
    );
    const fail = (e: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      proc.kill('SIGKILL');
      reject(e);
    };
    proc.stderr?.on('data', (s: string) => {
      out += s;
      const m = /toolgraph serving (http:\/\/[^\s]+?:(\d+))\b/.exec(out);
      if (m && !settled) {
        settled = true;
        clearTimeout(timer);
        const url = m[1] as string;
        const port = Number(m[2]);
        resolve({
          proc,
          url,
          port,
          output: () => out,
          exited,
          async kill9() {
            if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
            await exited;
          },
          async stop() {
            if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
            await exited;
          },
        });
      }
    });
    void exited.then(({ code, signal }) =>
      fail(new Error(`the server exited (code ${code}, signal ${signal}) before listening; output:\n${out}`)),
    );
  });
}
