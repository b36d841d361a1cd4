/** The engine's one timer, for the scheduler's next wake-up (retry backoffs, rate refills, open-run timeouts). */
export class WakeTimer {
  private timer: NodeJS.Timeout | undefined;
  private at: number | undefined;

  constructor(
    private readonly clock: () => number,
    /** Called when the wake-up at `at` is due. */
    private readonly fire: (at: number) => void,
  ) {}

  /** Keeps exactly one timer, for `at` (none for undefined); the same instant again changes nothing. */
  set(at: number | undefined): void {
    if (at === this.at) return;
    this.clear();
    this.at = at;
    if (at === undefined) return;
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        this.at = undefined;
        this.fire(at);
      },
      Math.max(0, at - this.clock()),
    );
  }

  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.at = undefined;
  }
}
