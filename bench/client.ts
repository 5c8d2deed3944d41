/**
 * The Kafka client alone, on the pre-produced topic: bench/kafka-consume.ts in its own process reads
 * every record and throws it away, first through the KafkaJS-compatible layer the worker uses
 * (`eachBatch`), then through the client's lower-level `consume(n)`, with the workers' batch size,
 * concurrency and prefetch bound. Its CPU per 1,000 records is the floor under a worker's.
 */
import type { BenchContext } from './context.js';
import type { ClientArgs } from './kafka-consume.js';
import { startScript } from './processes.js';
import type { CaseResult } from './results.js';

const MODES = [
  ['clientKafkaJS', 'KafkaJS layer, eachBatch', 'the Kafka client alone: KafkaJS layer (eachBatch), records thrown away'],
  ['clientConsume', 'lower-level consume', "the Kafka client alone: lower-level consume(n), records thrown away"],
] as const;

export async function runClient(ctx: BenchContext, topic: string, total: number): Promise<Record<string, CaseResult>> {
  const o = ctx.options;
  const config = ctx.caseConfig('client', topic);
  const args: ClientArgs = { config, records: total, mode: 'both', maxBatch: o.maxBatch, concurrency: o.concurrency, maxBufferKb: o.maxBufferMb * 1024 };
  const proc = startScript(ctx, 'kafka client alone', 'kafka-consume', args, true);
  const lines: Array<{ label: string; records: number; cpuMs: number; seconds: number }> = [];
  proc.onLine((line) => {
    if (line.startsWith('{"label"')) lines.push(JSON.parse(line) as (typeof lines)[number]);
  });
  try {
    ctx.status('client: reading the topic twice…');
    const { code } = await proc.exited;
    if (code !== 0 || lines.length !== MODES.length) throw new Error(`bench/kafka-consume.ts exited with ${code}: ${proc.tail()}`);
  } finally {
    await proc.stop();
  }
  return Object.fromEntries(
    MODES.map(([name, label, title]) => {
      const l = lines.find((x) => x.label.startsWith(label))!;
      const c: CaseResult = {
        title,
        eventsPerSec: l.records / l.seconds,
        events: l.records,
        seconds: Math.round(l.seconds * 100) / 100,
        processes: [{ role: 'client', pid: proc.pid, peakRssMiB: null, cpuSeconds: Math.round(l.cpuMs / 10) / 100 }],
        cpuMsPer1000Events: Math.round((l.cpuMs / l.records) * 1000 * 10) / 10,
      };
      return [name, c];
    }),
  );
}
