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
