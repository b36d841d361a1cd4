/**
 * A replica's lease (DESIGN §12). A process joins the cluster as a new *instance* (`name/random`): a row
 * of `replicas` whose `lease_until` it pushes ahead every `leaseMs / 3`, on the database's clock. Its
 * runs are its own while that holds; appends are fenced by it (store/postgres-append.ts).
 *
 * The lease is lost when a renewal finds it ended already (the process was paused, or the database
 * unreachable, for longer than the lease), or when no renewal got through for a whole lease by this
 * process's own clock (measured from when the last good renewal was sent, so it errs early). Then
 * `lost` is told once; the cluster drops its runs and joins again as a new instance.
 *
 * A new instance ends the leases of earlier instances of the same name at once: that name's process
 * was restarted, so their runs can be taken over now, not after the lease. Names must be unique: a
 * replica whose lease was ended that way (`replaced`) while it lived waits for the name to be free
 * before it joins again (cluster.ts), rather than take the name back from the other process.
 */
import { randomBytes } from 'node:crypto';
import type { LeaseSql } from '../store/postgres/lease.js';

export interface LeaseHooks {
  lost(reason: string): void;
  /** Each renewal's round trip (ms), for the metrics. */
  renewed?(ms: number): void;
}

export class Lease {
  instance: string | undefined;
  /** By this process's clock (performance.now()): until when the lease surely holds. */
  private holdsUntil = 0;
  private timer: NodeJS.Timeout | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private renewing = false;
  private stopped = false;

  constructor(
    private readonly sql: LeaseSql,
    readonly name: string,
    readonly leaseMs: number,
    private readonly hooks: LeaseHooks,
  ) {}

  /** Joins as a new instance; rejects when the database cannot be reached. */
  async join(): Promise<string> {
    const instance = `${this.name}/${randomBytes(4).toString('hex')}`;
    const sent = performance.now();
    await this.sql.join(instance, this.name, this.leaseMs);
    this.instance = instance;
    this.held(sent);
    this.schedule();
    return instance;
  }

  /** Whether the lease surely holds now, by this process's clock. */
  get holds(): boolean {
    return this.instance !== undefined && performance.now() < this.holdsUntil;
  }

  /** Stops renewing; `release`: ends the lease now, so that other replicas take the runs over at once. */
  async stop(release: boolean): Promise<void> {
    this.stopped = true;
    this.clear();
    if (release && this.instance) await this.sql.end(this.instance).catch(() => {});
  }

  private schedule(): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.renew(), Math.max(50, Math.floor(this.leaseMs / 3)));
    this.timer.unref();
  }

  private async renew(): Promise<void> {
    const instance = this.instance;
    if (this.renewing || this.stopped || instance === undefined) return;
    this.renewing = true;
    const sent = performance.now();
    try {
      const renewed = await this.sql.renew(instance, this.leaseMs);
      if (instance !== this.instance) return;
      if (!renewed) {
        this.lose('the lease had ended when it was renewed (the process was paused or cut off for longer than the lease)');
        return;
      }
      this.hooks.renewed?.(performance.now() - sent);
      this.held(sent);
    } catch {
      // Tried again at the next turn; the watchdog ends the lease if none gets through in time.
    } finally {
      this.renewing = false;
      if (instance === this.instance) this.schedule();
    }
  }

  private held(sent: number): void {
    this.holdsUntil = sent + this.leaseMs;
    if (this.watchdog) clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => {
      if (!this.stopped && performance.now() >= this.holdsUntil) this.lose('no renewal of the lease got through for a whole lease');
    }, this.leaseMs + 1);
    this.watchdog.unref();
  }

  private lose(reason: string): void {
    this.drop();
    this.hooks.lost(reason);
  }

  /** Whether an instance of this replica's name holds a lease now (this one's, or another process's). */
  nameHeld(): Promise<boolean> {
    return this.sql.held(this.name);
  }

  /** Whether a later instance of this name ended `instance`'s lease (another process joined under it). */
  replaced(instance: string): Promise<boolean> {
    return this.sql.replaced(instance);
  }

  /** Lets the instance go without a word (the cluster found out otherwise that it lost it). */
  drop(): void {
    this.instance = undefined;
    this.clear();
  }

  private clear(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.watchdog) clearTimeout(this.watchdog);
    this.timer = undefined;
    this.watchdog = undefined;
  }
}
