/**
 * `exactlyonce setup`: makes the Kafka client's native part in the project that installed the package
 * (docs/getting-started.md, "In your own project: `npm install exactlyonce`"). It runs scripts/kafka-client.sh, the one build recipe `make deps`
 * runs in a clone: a client that already loads with every codec and SASL mechanism is kept; otherwise
 * a build cached in ~/.cache/exactlyonce is copied, or the client is built from the librdkafka source it
 * bundles, offline (~2-3 minutes, once per machine and client version).
 */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Command } from '@commander-js/extra-typings';
import { ExactlyOnceError } from '../errors.js';
import { packageFile } from '../package-root.js';
import { action } from './common.js';

/** The folder of @confluentinc/kafka-javascript as this package's modules resolve it (hoisted or not). */
function clientFolder(): string {
  try {
    return path.dirname(createRequire(import.meta.url).resolve('@confluentinc/kafka-javascript/package.json'));
  } catch (e) {
    throw new ExactlyOnceError('EO_DEPS_MISSING', '@confluentinc/kafka-javascript is not installed beside exactlyonce; run `npm install exactlyonce` in your project', { cause: e });
  }
}

export function setupCommand(): Command {
  return new Command('setup')
    .description(
      "build the Kafka client's native part offline, from the librdkafka source it bundles (needs g++, make, python3; " +
        'Debian -dev packages are installed when missing), with gzip, snappy, lz4, zstd, SSL and SASL; kept when it already has them',
    )
    .action(
      action(async () => {
        const script = packageFile('scripts', 'kafka-client.sh');
        const child = spawn('bash', [script, clientFolder()], { stdio: 'inherit' });
        const code = await new Promise<number>((resolve, reject) => {
          child.once('error', reject);
          child.once('exit', (c, signal) => resolve(c ?? (signal === null ? 1 : 128)));
        });
        return code;
      }),
    );
}
