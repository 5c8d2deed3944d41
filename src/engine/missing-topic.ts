/**
 * The coded error for a topic a job reads or publishes to that does not exist. The hint is the
 * command that creates that very topic: `topic create` makes its `--topic` and the compacted
 * `--alerts-topic` (the events job's output), so the events job's hint names both of its topics, and
 * another job's (a sink's) says `--no-alerts`: only its own topic.
 */
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';

export function missingTopic(
  config: Pick<ConnectionConfig, 'brokers' | 'topic' | 'alertsTopic'>,
  topic: string,
  outputTopics: readonly string[],
  /** Found by a send of a running worker (the topic deleted under it): its partition stops. */
  running?: { cause: unknown },
): ExactlyOnceError {
  const role = topic === config.topic ? 'topic' : 'output topic';
  const alerts = outputTopics.includes(config.alertsTopic) ? ` --alerts-topic ${config.alertsTopic}` : '';
  // Another job's output topic (an aggregate sink's closed windows) is compacted: its latest message per key is the state.
  const create = topic === config.alertsTopic && alerts !== '' ? `--topic ${config.topic}${alerts}` : `--topic ${topic}${alerts === '' ? ` --no-alerts${role === 'output topic' ? ' --compacted' : ''}` : alerts}`;
  const at = `${role} ${topic} does not exist at ${config.brokers.join(',')}`;
  if (running === undefined) return new ExactlyOnceError('EO_TOPIC_MISMATCH', `${at}; run \`exactlyonce topic create ${create}\``);
  return new ExactlyOnceError(
    'EO_TOPIC_MISMATCH',
    `${at} (deleted under a running worker?): the partition stops at its checkpoint, nothing is skipped. Run \`exactlyonce topic create ${create}\`, then restart the worker`,
    { cause: running.cause },
  );
}
