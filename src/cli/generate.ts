/** `exactlyonce generate`: the seed job's TestMessageGenerator (src/jobs/events/generator.ts), plus counts, rates, mixes and bad records. */
import { Command, Option } from '@commander-js/extra-typings';
import { BAD_KINDS, generate, totalEvents, type GeneratorOptions } from '../jobs/events/generator.js';
import { intOption, ratioOption } from './flags.js';
import { producePaced } from '../harness/paced-producer.js';
import { Producer } from '../kafka/producer.js';
import { action, connection, healthMixOption, withConnection } from './common.js';
import { Progress } from './progress.js';

const CHUNK = 500;
const IN_FLIGHT = 4;

export function generateCommand(): Command {
  return withConnection(
    new Command('generate')
      .description('send simulated events to the topic (the original generator: 3 clients × 200 Critical events, a 500 ms pause every 10 rounds)')
      .addOption(new Option('--events-per-key <n>', 'events per client').default(200).argParser(intOption('--events-per-key', 1, 1e9)))
      .addOption(new Option('--count <n>', 'total events (overrides --events-per-key)').argParser(intOption('--count', 1, 1e10)))
      .addOption(new Option('--rate <n>', 'events per second (no 500 ms pauses then)').argParser(intOption('--rate', 1, 1e7)))
      .option('--no-delay', 'skip the 500 ms pause every ten rounds')
      .addOption(new Option('--health-mix <mix>', 'weights of health 0,1,2, e.g. 0:70,1:20,2:10').default([0, 0, 1], '2:100').argParser(healthMixOption))
      .addOption(new Option('--sources <n>', 'distinct sources').default(1).argParser(intOption('--sources', 1, 1e6)))
      .addOption(new Option('--clients <n>', 'distinct clients (the keys)').default(3).argParser(intOption('--clients', 1, 1e6)))
      .addOption(new Option('--seed <n>', 'seed for a reproducible stream of ids, healths and bad records').argParser(intOption('--seed', 0, 2 ** 32 - 1)))
      .addOption(new Option('--late-ratio <r>', 'fraction of events sent late (ts in the past)').default(0).argParser(ratioOption('--late-ratio')))
      .addOption(new Option('--late-by-ms <ms>', 'how late: ts is this far (± half) in the past').default(120_000).argParser(intOption('--late-by-ms', 1, 1e12)))
      .addOption(new Option('--bad-ratio <r>', `fraction of malformed records (${BAD_KINDS.join(', ')})`).default(0).argParser(ratioOption('--bad-ratio'))),
    ['brokers', 'topic', 'kafkaConfig'],
  ).action(
    action(async (opts, cmd) => {
      const config = connection(cmd);
      const o: GeneratorOptions = {
        eventsPerKey: opts.eventsPerKey,
        count: opts.count,
        clients: opts.clients,
        sources: opts.sources,
        healthMix: opts.healthMix,
        badRatio: opts.badRatio,
        seed: opts.seed ?? Math.floor(Math.random() * 2 ** 32),
        lateRatio: opts.lateRatio,
        lateByMs: opts.lateByMs,
      };
      const rate = opts.rate;
      const pauseEveryTen = opts.delay !== false && rate === undefined;
      const producer = new Producer(config);
      await producer.connect();
      const progress = new Progress('generate', totalEvents(o));
      const started = Date.now();
      let bad = 0;
      let sent: number;
      try {
        sent = await producePaced(
          producer,
          (function* () {
            for (const r of generate(o)) {
              if (r.kind !== 'valid') bad++;
              yield { key: r.key, value: r.value };
            }
          })(),
          {
            topic: config.topic,
            rate,
            chunk: CHUNK,
            inFlight: IN_FLIGHT,
            // The seed job's generator pacing: a 500 ms pause after every ten rounds (one event per client each).
            pauseAfter: (i) => (pauseEveryTen && i % (o.clients * 10) === 0 ? 500 : 0),
            onAcked: (n) => progress.update(n),
          },
        );
      } finally {
        await producer.close();
        progress.done();
      }
      const secs = (Date.now() - started) / 1000;
      process.stdout.write(
        `sent ${sent} events (${bad} malformed) to ${config.topic} in ${secs.toFixed(1)}s, seed ${o.seed}\n` +
          `${Math.round(sent / Math.max(secs, 0.001))} sent per second\n`,
      );
    }),
  );
}
