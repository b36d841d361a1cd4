/**
 * Two tools over an in-memory file map for the adapter tests: `write_file` stores its content when it
 * ends (after `ms`), `read_file` reads when it starts and answers after `ms`. So a read that runs
 * beside a write of the same file misses it (the race the frameworks' `Promise.all` has), and a read
 * that starts after the write ended sees it. `log` lists starts and ends in the order they happened.
 */
export interface FileTools {
  files: Map<string, string>;
  log: string[];
  write_file(args: { path: string; content: string }): Promise<{ written: string; bytes: number }>;
  read_file(args: { path: string }): Promise<{ path: string; content: string | null }>;
}

/** The toolgraph fields of the two tools. */
export const FILE_TOOL_FIELDS = {
  read_file: { reads: ['file:{path}'], risk: 'read' as const, idempotent: true },
  write_file: { writes: ['file:{path}'] },
};

export function fileTools(ms = 15, initial: Record<string, string> = { '/y': 'why' }): FileTools {
  const files = new Map(Object.entries(initial));
  const log: string[] = [];
  const pause = () => new Promise((resolve) => setTimeout(resolve, ms));
  return {
    files,
    log,
    async write_file({ path, content }) {
      log.push(`start write ${path}`);
      await pause();
      files.set(path, content);
      log.push(`end write ${path}`);
      return { written: path, bytes: content.length };
    },
    async read_file({ path }) {
      log.push(`start read ${path}`);
      const content = files.get(path) ?? null;
      await pause();
      log.push(`end read ${path}`);
      return { path, content };
    },
  };
}

/** The order facts every adapter test asserts: the read of /x after the write, /y beside it. */
export function orderOf(log: readonly string[]): { readXAfterWrite: boolean; readYBesideWrite: boolean } {
  const at = (s: string) => {
    const i = log.indexOf(s);
    if (i < 0) throw new Error(`"${s}" is not in the log: ${log.join(', ')}`);
    return i;
  };
  return {
    readXAfterWrite: at('start read /x') > at('end write /x'),
    readYBesideWrite: at('start read /y') < at('end write /x'),
  };
}
