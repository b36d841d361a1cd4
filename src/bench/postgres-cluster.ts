/**
 * A throwaway PostgreSQL cluster for tests and the bench (Debian's postgresql-15; `.ci/run` installs it): `initdb`
 * into a temp folder, `pg_ctl` on a free port on 127.0.0.1, fsync on; never a shared system service.
 * `initdb` refuses to run as root, so as root the folder goes to the `postgres` user and the commands
 * run as that user (`runuser`). The cluster is stopped and its folder removed by `stop()`, and, should
 * the test process end without it (a failure), on the process's exit.
 *
 * One cluster per test file that needs it (`beforeAll`), one database per store (`createDatabase`).
 * @example
 * const pg = await startPostgres();
 * const url = await pg.createDatabase();   // postgres://postgres@127.0.0.1:PORT/tg_…
 * …
 * await pg.stop();
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

export interface TestPostgres {
  port: number;
  /** The URL of a database of this cluster (default `postgres`). */
  url(db?: string): string;
  /** The same database through the server's Unix socket instead of TCP on 127.0.0.1. */
  socketUrl(url: string): string;
  /** Creates an empty database; returns its URL. */
  createDatabase(name?: string): Promise<string>;
  /**
   * Stops the server, keeping its data (to test a database that goes away): `fast` (the default) ends
   * what runs cleanly; `immediate` kills it where it is, like a crash (a statement in flight never commits).
   */
  pause(mode?: 'fast' | 'immediate'): void;
  /** Starts it again on the same port. */
  resume(): void;
  /**
   * Sends `signal` to the server's processes, the postmaster and its children (`SIGSTOP`: a frozen
   * server that holds its connections open and answers nothing; `SIGCONT`: thawed).
   */
  signal(signal: 'SIGSTOP' | 'SIGCONT'): void;
  /** Stops it and removes everything. */
  stop(): Promise<void>;
}

/** The folder of Debian's PostgreSQL binaries (`PG_BIN` overrides). */
export function postgresBin(): string {
  const env = process.env.PG_BIN;
  if (env) return env;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0)
    throw new Error('PostgreSQL is not installed: apt-get install -y postgresql-15 (or set PG_BIN to the folder of initdb and pg_ctl)');
  return join(root, versions[0] as string, 'bin');
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

const asRoot = userInfo().uid === 0;

/** Runs a PostgreSQL binary, as the `postgres` user when this process is root. */
function run(bin: string, args: string[]): void {
  const [cmd, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  const r = spawnSync(cmd, argv, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${bin} ${args.join(' ')} failed (${r.status}): ${r.stderr || r.stdout}`);
}

/** `settings`: more `-c name=value` of the server (`shared_preload_libraries=pg_stat_statements`). */
export async function startPostgres(settings: readonly string[] = []): Promise<TestPostgres> {
  const bin = postgresBin();
  const dir = mkdtempSync(join(tmpdir(), 'toolgraph-pg-'));
  const data = join(dir, 'data');
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  run(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8', '--locale', 'C']);
  const port = await freePort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=200${settings.map((x) => ` -c ${x}`).join('')}`;
  const start = () => run(join(bin, 'pg_ctl'), ['-D', data, '-o', options, '-l', join(dir, 'log'), '-w', '-t', '30', 'start']);
  const halt = (mode: 'fast' | 'immediate') => run(join(bin, 'pg_ctl'), ['-D', data, '-m', mode, '-w', 'stop']);
  let running = false;
  const onExit = () => {
    if (running)
      spawnSync(
        asRoot ? 'runuser' : join(bin, 'pg_ctl'),
        asRoot
          ? ['-u', 'postgres', '--', join(bin, 'pg_ctl'), '-D', data, '-m', 'immediate', 'stop']
          : ['-D', data, '-m', 'immediate', 'stop'],
      );
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', onExit);
  start();
  running = true;
  const url = (db = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${db}`;
  return {
    port,
    url,
    socketUrl: (u) => `postgres://postgres@localhost:${port}/${new URL(u).pathname.slice(1)}?host=${encodeURIComponent(dir)}`,
    async createDatabase(name = `tg_${randomBytes(6).toString('hex')}`) {
      const client = new pg.Client({ connectionString: url() });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      return url(name);
    },
    pause(mode = 'fast') {
      halt(mode);
      running = false;
    },
    resume() {
      start();
      running = true;
    },
    signal(signal) {
      // The postmaster's pid is the first line of postmaster.pid; its children are the backends and workers.
      const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
      const children = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
        .stdout.split('\n')
        .filter((l) => l.trim() !== '')
        .map(Number);
      // Stopped children first, so none acts on a stopped postmaster; thawed postmaster first.
      const order = signal === 'SIGSTOP' ? [...children, pid] : [pid, ...children];
      for (const p of order) {
        try {
          process.kill(p, signal);
        } catch {
          // Gone meanwhile.
        }
      }
    },
    async stop() {
      process.removeListener('exit', onExit);
      if (running)
        spawnSync(
          asRoot ? 'runuser' : join(bin, 'pg_ctl'),
          asRoot
            ? ['-u', 'postgres', '--', join(bin, 'pg_ctl'), '-D', data, '-m', 'immediate', '-w', 'stop']
            : ['-D', data, '-m', 'immediate', '-w', 'stop'],
        );
      running = false;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
