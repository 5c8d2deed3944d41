/**
 * What `chaos --transactional` writes with: each send of the paced producer (src/harness/paced-producer.ts)
 * is one transaction of the TransactionalProducer, two of every three committed and every third aborted,
 * and the run ends with one more aborted transaction — the log an upstream Kafka Streams or Flink job
 * with exactly-once on leaves: aborted records and transaction markers between and after the committed
 * records, none of which the workers are ever given.
 */
import type { OutgoingRecord, TransactionalProducer, TransactionOutcome } from '../kafka/producer.js';

export class TransactionMix {
  /** Transactions by outcome. */
  readonly transactions: Record<TransactionOutcome, number> = { committed: 0, aborted: 0, unknown: 0 };
  /** Records in committed transactions: what the workers must store. */
  committedRecords = 0;
  /** Records in transactions whose commit was cut short (committed or not: only the log can tell). */
  uncertainRecords = 0;
  private sent = 0;

  constructor(private readonly producer: Pick<TransactionalProducer, 'write'>) {}

  /** One transaction: the 2nd of every three is aborted. */
  async send(topic: string, records: readonly OutgoingRecord[]): Promise<void> {
    await this.write(topic, records, this.sent++ % 3 !== 1);
  }

  /** Ends the log with an aborted transaction of `records`. */
  async endAborted(topic: string, records: readonly OutgoingRecord[]): Promise<void> {
    await this.write(topic, records, false);
  }

  private async write(topic: string, records: readonly OutgoingRecord[], commit: boolean): Promise<void> {
    const outcome = await this.producer.write(topic, records, commit);
    this.transactions[outcome]++;
    if (outcome === 'committed') this.committedRecords += records.length;
    if (outcome === 'unknown') this.uncertainRecords += records.length;
  }
}
