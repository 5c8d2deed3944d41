/**
 * Structured logs (pino): JSON lines for machines, pretty on a terminal. One line per state change
 * (assigned, revoked, server down/up), never one per record.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(name: string, level = process.env['EXACTLYONCE_LOG_LEVEL'] ?? 'info'): Logger {
  const pretty = process.stderr.isTTY && process.env['EXACTLYONCE_LOG_FORMAT'] !== 'json';
  return pino(
    { name, level, base: { pid: process.pid } },
    pretty
      ? pino.transport({ target: 'pino-pretty', options: { destination: 2, ignore: 'pid,hostname', translateTime: 'HH:MM:ss.l' } })
      : pino.destination({ dest: 2, sync: true }),
  );
}
