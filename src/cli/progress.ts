/** A one-line progress bar on a terminal (stderr); silent when stderr is not a terminal. */
export class Progress {
  private last = 0;
  private readonly started = Date.now();
  private readonly tty = process.stderr.isTTY === true;

  constructor(
    private readonly label: string,
    private readonly total: number,
  ) {}

  update(done: number, force = false): void {
    if (!this.tty) return;
    const now = Date.now();
    if (!force && now - this.last < 200) return;
    this.last = now;
    const width = 30;
    const frac = this.total > 0 ? Math.min(1, done / this.total) : 0;
    const bar = '#'.repeat(Math.round(frac * width)).padEnd(width, '.');
    const rate = done / Math.max(0.001, (now - this.started) / 1000);
    process.stderr.write(`\r${this.label} [${bar}] ${done}/${this.total} ${Math.round(rate)}/s `);
  }

  done(): void {
    if (this.tty) process.stderr.write('\n');
  }
}
