/**
 * Secrets in the connection settings: which librdkafka properties hold one, how Kafka properties
 * are read from a file or the environment, and how a secret is kept out of anything we print
 * (logs, error messages, the dashboard, metrics).
 */
import { ExactlyOnceError } from './errors.js';

export const REDACTED = '[redacted]';

/**
 * librdkafka properties whose value is a secret: passwords, the JAAS line (it carries one), keys,
 * OAuth client secrets and tokens (https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md).
 */
export function isSecretProperty(key: string): boolean {
  return /password|secret|jaas|token|\.key\.pem$|^ssl\.key$|credentials|sasl\.oauthbearer\.config/i.test(key);
}

/** The properties with every secret value replaced, for printing. */
export function redactKafkaConfig(config: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(config).map(([k, v]) => [k, isSecretProperty(k) ? REDACTED : v]));
}

/**
 * librdkafka properties from text: a JSON object (`{"sasl.password": "a,b"}`), or one `key=value`
 * per line as in a Java/librdkafka properties file (blank lines and `#` or `!` comments skipped,
 * spaces around the key ignored, the value taken as is up to the end of the line — commas, `=` and
 * quotes included). `where` names the source in the error.
 */
export function parseKafkaProperties(text: string, where: string): Record<string, string> {
  if (text.trimStart().startsWith('{')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new ExactlyOnceError('EO_CONFIG_INVALID', `${where}: expected a JSON object of librdkafka properties or key=value lines (the JSON does not parse)`);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new ExactlyOnceError('EO_CONFIG_INVALID', `${where}: expected a JSON object of librdkafka properties`);
    }
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(parsed)) {
      if (!['string', 'number', 'boolean'].includes(typeof v)) throw new ExactlyOnceError('EO_CONFIG_INVALID', `${where}: property ${k}: expected a string, number or boolean`);
      out[checkKey(k, where)] = String(v);
    }
    return out;
  }
  const out: Record<string, string> = {};
  text.split(/\r?\n/).forEach((line, i) => {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#') || trimmed.startsWith('!')) return;
    const eq = line.indexOf('=');
    // The line itself may hold a secret: name the line, never show it.
    if (eq < 0) throw new ExactlyOnceError('EO_CONFIG_INVALID', `${where}: line ${i + 1}: expected key=value`);
    out[checkKey(line.slice(0, eq).trim(), `${where}: line ${i + 1}`)] = line.slice(eq + 1).trimStart().replace(/\r$/, '');
  });
  return out;
}

function checkKey(key: string, where: string): string {
  if (!/^[a-z0-9._]+$/.test(key)) throw new ExactlyOnceError('EO_CONFIG_INVALID', `${where}: '${key.slice(0, 60)}' is not a librdkafka property name`);
  return key;
}

/** `text` with every occurrence of each secret (of 4+ characters) replaced by REDACTED. */
export function redact(text: string, secrets: readonly (string | undefined)[]): string {
  let out = text;
  for (const s of secrets) if (s !== undefined && s.length >= 4) out = out.split(s).join(REDACTED);
  return out;
}
