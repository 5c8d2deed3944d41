/**
 * Which latencies Cassandra's garbage-collection pauses account for. On this machine a latency case's
 * tail is made of a few stalls, each while Cassandra's JVM was paused for a young collection (G1 with
 * Cassandra's own settings: a 300 ms pause target). The local stack's Cassandra logs every collection
 * with its wall-clock time (`-Xlog:gc`, src/stack/cassandra-server.ts): the bench reads what that log
 * gained during the case.
 */
import { quantile } from './row-watcher.js';

export interface Pause {
  /** Epoch ms: the pause's start (its end minus its length) and end (the line's time). */
  from: number;
  to: number;
}

/** `[2026-12-05T02:37:42.100+0000][2.775s] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 87M->26M(2048M) 22.652ms` */
const PAUSE = /^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})([+-]\d\d)(\d\d)\].* Pause .* (\d+(?:\.\d+)?)ms$/;

/** Every stop-the-world pause in a JVM's `-Xlog:gc` lines (decorated with `time`). */
export function parseGcPauses(log: string): Pause[] {
  const pauses: Pause[] = [];
  for (const line of log.split('\n')) {
    const m = PAUSE.exec(line.trimEnd());
    if (m === null) continue;
    const to = new Date(`${m[1]}${m[2]}:${m[3]}`).getTime();
    pauses.push({ from: to - Number(m[4]), to });
  }
  return pauses;
}

export interface PauseShare {
  /** Pauses that overlapped the measured window, their seconds in it, and the longest, in ms. */
  pauses: number;
  pausedSeconds: number;
  longestMs: number;
  /** Sampled latencies above `overMs`, and how many of them were in flight during a pause. */
  overMs: number;
  over: number;
  overDuringPause: number;
  /** p99 of the samples in flight during no pause (NaN without any). */
  p99OutsidePausesMs: number;
}

/**
 * Sample i (event time ts[i], latency l[i]) was in flight during a pause when [ts, ts + l] and the
 * pause's [from, to] overlap. Only samples with an event time in [from, to) of the window count.
 */
export function pauseShare(ts: readonly number[], latencyMs: readonly number[], pauses: readonly Pause[], window: { from: number; to: number }, overMs = 100): PauseShare {
  const inWindow = pauses.filter((p) => p.to >= window.from && p.from < window.to);
  const during = (t: number, l: number) => inWindow.some((p) => t <= p.to && t + l >= p.from);
  const outside: number[] = [];
  let over = 0;
  let overDuringPause = 0;
  for (let i = 0; i < ts.length; i++) {
    const t = ts[i]!;
    if (t < window.from || t >= window.to) continue;
    const l = latencyMs[i]!;
    const paused = during(t, l);
    if (!paused) outside.push(l);
    if (l > overMs) {
      over++;
      if (paused) overDuringPause++;
    }
  }
  outside.sort((a, b) => a - b);
  const seconds = inWindow.reduce((s, p) => s + (Math.min(p.to, window.to) - Math.max(p.from, window.from)) / 1000, 0);
  return {
    pauses: inWindow.length,
    pausedSeconds: Math.round(seconds * 1000) / 1000,
    longestMs: Math.round(Math.max(0, ...inWindow.map((p) => p.to - p.from))),
    overMs,
    over,
    overDuringPause,
    p99OutsidePausesMs: quantile(outside, 0.99),
  };
}
