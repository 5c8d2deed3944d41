/**
 * Which records the brokers acknowledged, per partition, from the producer's delivery reports: the
 * harness's count of "produced" is then checked partition by partition against what the log holds,
 * and a shortfall names the acknowledged offsets the log lacks — the evidence that tells a loss in
 * Kafka (acknowledged at offset o, not in the log) from a counting error of ours (the totals differ,
 * every acknowledged offset is there).
 */
export class AckedLedger {
  private readonly offsets = new Map<number, bigint[]>();

  /** One record acknowledged at `offset` of `partition`. */
  add(partition: number, offset: bigint): void {
    let list = this.offsets.get(partition);
    if (list === undefined) this.offsets.set(partition, (list = []));
    list.push(offset);
  }

  /** Records acknowledged in all. */
  get total(): number {
    let n = 0;
    for (const l of this.offsets.values()) n += l.length;
    return n;
  }

  /**
   * One line per partition whose log does not hold what was acknowledged there: `held` is the
   * number of records the log has in [log start, log end) (nothing else writes the topic), `end`
   * its log end. Empty when every partition holds exactly its acknowledged records.
   */
  compare(held: ReadonlyMap<number, { records: number; end: bigint }>): string[] {
    const out: string[] = [];
    for (const p of [...new Set([...this.offsets.keys(), ...held.keys()])].sort((a, b) => a - b)) {
      const acked = this.offsets.get(p) ?? [];
      const h = held.get(p) ?? { records: 0, end: 0n };
      const distinct = new Set(acked.map(String)).size;
      if (distinct === h.records && acked.length === distinct) continue;
      const beyond = acked.filter((o) => o >= h.end).sort((a, b) => (a < b ? -1 : 1));
      out.push(
        `partition ${p}: ${acked.length} records acknowledged${distinct !== acked.length ? ` (${acked.length - distinct} offsets acknowledged twice)` : ''}, the log holds ${h.records} (log end ${h.end})` +
          (beyond.length > 0 ? `; acknowledged at offsets ${beyond.slice(0, 10).join(', ')}${beyond.length > 10 ? ', …' : ''}, beyond the log end: lost by Kafka` : '; every acknowledged offset is below the log end'),
      );
    }
    return out;
  }
}
