/**
 * One LISTEN connection per replica (DESIGN §12): what other replicas tell each other through
 * PostgreSQL's NOTIFY, sent at the commit of what they announce.
 *
 * - `toolgraph_events`: `runId:seq,…`, runs that have new events (sent by every append);
 * - `toolgraph_commands`: an instance that has a command to apply;
 * - `toolgraph_command_done`: the id of a command that has its answer;
 * - `toolgraph_permits`: permits were given back;
 * - `toolgraph_pauses`: a tool (or keyed group) was paused by backpressure (DESIGN §4);
 * - `toolgraph_wants`: `{ instance, keys }`, a replica's calls wait for these counters: those that hold
 *   slices of them give back what they do not use (permit-slices.ts).
 *
 * A lost connection is opened again (the pause grows to 2 s); `resync` listeners are told each time it
 * is back, since what was sent meanwhile was missed, and they read what they need again. Nothing here
 * is the only way to learn something: every user also polls slowly, so a notification lost is a delay,
 * not a loss.
 */
import { type Listening, listen } from '../store/postgres/listen.js';

export const CHANNELS = [
  'toolgraph_events',
  'toolgraph_commands',
  'toolgraph_command_done',
  'toolgraph_permits',
  'toolgraph_pauses',
  'toolgraph_wants',
] as const;
export type Channel = (typeof CHANNELS)[number];

type Listener = (payload: string) => void;

export class Notifications {
  private connection: Listening | undefined;
  private readonly listeners = new Map<Channel | 'resync', Set<Listener>>();
  private closed = false;
  private pause = 100;
  private timer: NodeJS.Timeout | undefined;
  /** Whether the connection listens now (for `/healthz` and tests). */
  listening = false;

  constructor(private readonly url: string) {}

  /** Connects; resolves once listening (or rejects when the first connection fails: it goes on trying). */
  start(): Promise<void> {
    return this.connect();
  }

  on(channel: Channel | 'resync', listener: Listener): () => void {
    let set = this.listeners.get(channel);
    if (!set) this.listeners.set(channel, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    const c = this.connection;
    this.connection = undefined;
    this.listening = false;
    await c?.close();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    let connection: Listening;
    try {
      connection = await listen(this.url, CHANNELS, {
        notify: (channel, payload) => this.tell(channel as Channel, payload),
        lost: () => this.lost(connection),
      });
    } catch (err) {
      this.retry();
      throw err;
    }
    if (this.closed) {
      await connection.close();
      return;
    }
    this.connection = connection;
    this.listening = true;
    this.pause = 100;
    this.tell('resync', '');
  }

  private lost(connection: Listening): void {
    if (this.connection !== connection) return;
    this.connection = undefined;
    this.listening = false;
    this.retry();
  }

  private retry(): void {
    if (this.closed || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.connect().catch(() => {});
    }, this.pause);
    this.timer.unref();
    this.pause = Math.min(this.pause * 2, 2000);
  }

  private tell(channel: Channel | 'resync', payload: string): void {
    for (const l of this.listeners.get(channel) ?? []) l(payload);
  }
}
