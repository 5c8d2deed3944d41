/**
 * The worker's health, as /readyz and the server_up gauge report it: whether it has been through a
 * group assignment, which partitions it owns and which of them are stopped, and whether Kafka or
 * Cassandra is known to be down (from the outcome of its last calls to each). State only; no timer,
 * no I/O.
 */

/** A server is reported down this long after its last failed call, unless a call succeeds first, in ms. */
export const DOWN_FOR_MS = 20_000;

/** Kafka, Cassandra, or a server a job's lookup asks (the Schema Registry: src/engine/job.ts DecodeLookup). */
export type Server = string;

export interface Readiness {
  ready: boolean;
  /** One line saying why (or what it owns). */
  detail: string;
}

export class ServerHealth {
  /** Epoch ms of the last failed and the last successful call, per server. */
  private readonly lastFailure = new Map<Server, number>();
  private readonly lastSuccess = new Map<Server, number>();
  private readonly owned = new Set<number>();
  /** Owned partitions stopped on an error the user must act on, with its code. */
  private readonly stopped = new Map<number, string>();
  private joined = false;

  /** `onFailure` counts each failure (the errors_total counter). */
  constructor(private readonly onFailure: (server: Server, e: unknown) => void = () => undefined) {}

  /** A call to `server` failed. */
  failed(server: Server, e: unknown): void {
    this.onFailure(server, e);
    this.lastFailure.set(server, Date.now());
  }

  /** A call to `server` succeeded. */
  answered(server: Server): void {
    this.lastSuccess.set(server, Date.now());
  }

  /** Kafka, Cassandra, and every other server a call was made to (a job's lookup: the Schema Registry). */
  servers(): Server[] {
    return [...new Set(['Kafka', 'Cassandra', ...this.lastFailure.keys(), ...this.lastSuccess.keys()])];
  }

  /** An assignment callback ran (possibly with no partitions: more workers than partitions). */
  joinedGroup(): void {
    this.joined = true;
  }

  /** The partition is owned now (its checkpoint was just read from Cassandra and its watermarks from Kafka: both answer). */
  partitionAssigned(partition: number): void {
    this.answered('Cassandra');
    this.answered('Kafka');
    this.joined = true;
    this.owned.add(partition);
    this.stopped.delete(partition);
  }

  partitionRevoked(partition: number): void {
    this.owned.delete(partition);
    this.stopped.delete(partition);
  }

  /** The owned partition is stopped on `code` until it is assigned again (a reset, a rebalance). */
  partitionStopped(partition: number, code: string): void {
    if (this.owned.has(partition)) this.stopped.set(partition, code);
  }

  /**
   * Down: the last call failed, and recently. Retries back off to at most 10 s (src/engine/retry.ts),
   * so an ongoing outage keeps failing more often than DOWN_FOR_MS; an idle worker that saw one failure
   * and then had nothing to retry is not reported down forever.
   */
  isDown(server: Server): boolean {
    const failed = this.lastFailure.get(server);
    if (failed === undefined || Date.now() - failed > DOWN_FOR_MS) return false;
    const ok = this.lastSuccess.get(server);
    return ok === undefined || failed > ok;
  }

  /**
   * Ready: the worker has been through a group assignment (it may own no partition when the group has
   * more workers than partitions), neither server is known to be down, and at least one partition it
   * owns is not stopped. A worker whose every partition is stopped does nothing until someone acts, and
   * an orchestrator or a load balancer must see that; one with some stopped still serves the others,
   * and says which are stopped.
   */
  readiness(): Readiness {
    if (!this.joined) return { ready: false, detail: 'not ready: waiting for the consumer group to assign partitions' };
    const down = this.servers().filter((server) => this.isDown(server));
    if (down.length > 0) return { ready: false, detail: `not ready: ${down.join(' and ')} not answering` };
    const owned = [...this.owned].sort((a, b) => a - b);
    const stopped = owned.filter((p) => this.stopped.has(p)).map((p) => `${p} ${this.stopped.get(p)!}`).join(', ');
    if (owned.length > 0 && owned.every((p) => this.stopped.has(p))) {
      return { ready: false, detail: `not ready: every partition it owns is stopped: ${stopped} (the error log says why; \`exactlyonce checkpoints list\` too)` };
    }
    const owns = `ready: owns ${owned.length === 0 ? 'no partition' : `partitions ${owned.join(',')}`}`;
    return { ready: true, detail: stopped === '' ? owns : `${owns} (stopped: ${stopped})` };
  }
}
