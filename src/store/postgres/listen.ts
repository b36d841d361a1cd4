/**
 * The LISTEN connection of a replica (DESIGN §12; cluster/notifications.ts): one client of its own,
 * outside the pool, bounded as the pool's connections are (store/pg-pool.ts), so a frozen server is a
 * retry, not a hang.
 */
import pg from 'pg';
import { PG_BOUNDS } from '../pg-pool.js';

/** An open LISTEN connection. */
export interface Listening {
  close(): Promise<void>;
}

export interface ListenHooks {
  /** A notification on one of the channels. */
  notify(channel: string, payload: string): void;
  /** The connection broke or ended (told at most once, and not after `close`). */
  lost(): void;
}

/** Connects to `url` and listens on `channels`; rejects (with nothing left open) when it cannot. */
export async function listen(url: string, channels: readonly string[], hooks: ListenHooks): Promise<Listening> {
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: PG_BOUNDS.connectTimeoutMs,
    query_timeout: PG_BOUNDS.statementTimeoutMs,
    keepAlive: true,
  });
  let open = true;
  const lost = () => {
    if (!open) return;
    open = false;
    client.end().catch(() => {});
    hooks.lost();
  };
  const close = async () => {
    open = false;
    await client.end().catch(() => {});
  };
  client.on('error', lost);
  client.on('end', lost);
  client.on('notification', (n) => hooks.notify(n.channel, n.payload ?? ''));
  try {
    await client.connect();
    // Channel names are our own constants (cluster/notifications.ts), not input.
    for (const ch of channels) await client.query(`LISTEN ${ch}`);
  } catch (err) {
    await close();
    throw err;
  }
  return { close };
}
