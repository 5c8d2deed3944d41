/**
 * The worker's health, as /readyz and the server_up gauge report it: whether it has been through a
 * group assignment, which partitions it owns, and whether Kafka or Cassandra is known to be down (from
 * the outcome of its last calls to each). State only; no timer, no I/O.
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
  }

  partitionRevoked(partition: number): void {
    this.owned.delete(partition);
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
   * more workers than partitions) and neither server is known to be down.
   */
  readiness(): Readiness {
    if (!this.joined) return { ready: false, detail: 'not ready: waiting for the consumer group to assign partitions' };
    const down = this.servers().filter((server) => this.isDown(server));
    if (down.length > 0) return { ready: false, detail: `not ready: ${down.join(' and ')} not answering` };
    const owned = [...this.owned].sort((a, b) => a - b);
    return { ready: true, detail: `ready: owns ${owned.length === 0 ? 'no partition' : `partitions ${owned.join(',')}`}` };
  }
}
