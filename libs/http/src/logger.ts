import pino, { Logger } from 'pino';

let logger: Logger | undefined;

/**
 * The PHI-safe logger (the "no PHI in logs" rule): structured JSON, request metadata only. Never pass
 * bodies, query strings, headers, or domain data to it; the redaction list is a second net.
 * `SVC_LOG_LEVEL` sets the level; `SVC_LOG_FILE` sends the log to a file (tests grep it). Every
 * line names the app (`service`) and, when several replicas of it run, the replica (`instance`,
 * SVC_INSTANCE_ID).
 */
export function getLogger(): Logger {
  if (!logger) {
    const level = process.env.SVC_LOG_LEVEL ?? 'info';
    const destination = process.env.SVC_LOG_FILE ? pino.destination({ dest: process.env.SVC_LOG_FILE, sync: true, mkdir: true }) : pino.destination(1);
    logger = pino(
      {
        level,
        base: { service: process.env.SVC_SERVICE_NAME ?? 'svc', ...(process.env.SVC_INSTANCE_ID ? { instance: process.env.SVC_INSTANCE_ID } : {}) },
        redact: {
          paths: ['req.headers', 'req.body', 'body', 'headers', 'authorization', 'query', 'message', 'data', 'email', 'token', 'secret', 'key'],
          censor: '[redacted]',
        },
      },
      destination,
    );
  }
  return logger;
}

/**
 * What a log line may say of an error: its name and up to `max` stack frames (the `at …` lines),
 * never its message, which lower layers may fill with data (and which may span lines).
 */
export function loggableError(err: unknown, max = 5): { name: string; stack?: string } {
  const e = err as { name?: unknown; stack?: unknown } | null | undefined;
  const name = typeof e?.name === 'string' ? e.name : typeof err;
  const frames =
    typeof e?.stack === 'string'
      ? e.stack
          .split('\n')
          .filter((line) => /^\s+at /.test(line))
          .slice(0, max)
      : [];
  return frames.length ? { name, stack: frames.join('\n') } : { name };
}
