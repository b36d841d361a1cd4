/**
 * The CLI in process: `main(argv, io)` with an io that keeps what it writes, as the tests of `plan`,
 * `run`, `replay` and `serve` drive it (a child process is only for what needs the real bin).
 */
import { main } from '../../src/cli/main.js';

type Io = Parameters<typeof main>[1];

/** An io that collects stdout and stderr (`isTTY` false unless asked). */
export function captureIo(isTTY = false): Io & { stdout: string; stderr: string } {
  const io = {
    stdout: '',
    stderr: '',
    isTTY,
    out: (s: string) => void (io.stdout += s),
    err: (s: string) => void (io.stderr += s),
  };
  return io;
}

/** Runs `toolgraph ARGV…` in process: its exit code and what it wrote. */
export async function runCli(argv: string[], isTTY = false): Promise<{ code: number; out: string; err: string }> {
  const io = captureIo(isTTY);
  const code = await main(argv, io);
  return { code, out: io.stdout, err: io.stderr };
}
