// bench/gc-pauses.ts: a JVM's -Xlog:gc lines parsed into pauses, and the latency samples they account for.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pauseLine } from '../../bench/report.js';
import { parseGcPauses, pauseShare } from '../../bench/gc-pauses.js';

// Lines as Java 17's G1 writes them with `-Xlog:gc:…:time,uptime` (a concurrent cycle between, not a pause).
const LOG = [
  '[2026-12-05T02:37:39.329+0000][0.005s] Using G1',
  '[2026-12-05T02:37:42.100+0000][2.775s] GC(0) Pause Young (Concurrent Start) (Metadata GC Threshold) 87M->26M(2048M) 22.652ms',
  '[2026-12-05T02:37:42.100+0000][2.775s] GC(1) Concurrent Mark Cycle',
  '[2026-12-05T02:37:42.114+0000][2.789s] GC(1) Pause Remark 30M->30M(2048M) 2.152ms',
  '[2026-12-05T02:37:42.150+0000][2.825s] GC(1) Concurrent Mark Cycle 50.123ms',
  '[2026-12-05T03:37:59.000+0100][20.7s] GC(2) Pause Young (Normal) (G1 Evacuation Pause) 1017M->305M(2048M) 257.000ms',
].join('\n');

test('parseGcPauses: every stop-the-world pause, ending at its line time (any UTC offset), not the concurrent phases', () => {
  const t = (iso: string) => new Date(iso).getTime();
  assert.deepEqual(parseGcPauses(LOG), [
    { from: t('2026-12-05T02:37:42.100Z') - 22.652, to: t('2026-12-05T02:37:42.100Z') },
    { from: t('2026-12-05T02:37:42.114Z') - 2.152, to: t('2026-12-05T02:37:42.114Z') },
    { from: t('2026-12-05T02:37:59.000Z') - 257, to: t('2026-12-05T02:37:59.000Z') },
  ]);
});

test('pauseShare: a sample counts as during a pause when its flight overlaps it; p99 of the rest; only the window counts', () => {
  const pauses = [{ from: 10_000, to: 10_250 }];
  // 100 samples outside (1..100 ms), and three in flight during the pause, two of them over 100 ms.
  const ts: number[] = [];
  const lat: number[] = [];
  for (let i = 1; i <= 100; i++) {
    ts.push(20_000 + i * 10);
    lat.push(i);
  }
  ts.push(9_800, 10_100, 10_240);
  lat.push(250, 400, 20); // 9,800 + 250 reaches into the pause; the others start in it
  ts.push(40_000); // after the window
  lat.push(900);
  const share = pauseShare(ts, lat, pauses, { from: 5_000, to: 30_000 });
  assert.deepEqual(share, { pauses: 1, pausedSeconds: 0.25, longestMs: 250, overMs: 100, over: 2, overDuringPause: 2, p99OutsidePausesMs: 99 });
  assert.equal(
    pauseLine(share),
    "Cassandra's JVM paused 1 time (0.25 s in all, the longest 250 ms); 2 of the 2 sampled latencies over 100 ms were in flight during a pause, and p99 outside them is 99 ms",
  );
  // A pause outside the window is not counted, and then every sample is outside one.
  assert.deepEqual(pauseShare(ts, lat, [{ from: 31_000, to: 32_000 }], { from: 5_000, to: 30_000 }), {
    pauses: 0,
    pausedSeconds: 0,
    longestMs: 0,
    overMs: 100,
    over: 2,
    overDuringPause: 0,
    p99OutsidePausesMs: 250,
  });
});
