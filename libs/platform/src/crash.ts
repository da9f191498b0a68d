import { getLogger, loggableError } from '@svc/http';

/**
 * The last resort of a service process: an exception no code caught, or a promise rejection no
 * code handled, is logged as one structured line at fatal (the error's name and stack frames,
 * never its message: lower layers may quote data in it, and Node's own report would print it to
 * stderr), then the process exits with code 1 as Node would, for its supervisor to start it again.
 * Installed first thing by both mains (runService, the standalone main).
 */
export function exitOnCrash(): void {
  const crash = (what: string) => (err: unknown) => {
    try {
      getLogger().fatal({ err: loggableError(err, 10) }, what);
    } finally {
      process.exit(1);
    }
  };
  process.on('uncaughtException', crash('uncaught exception; the process exits'));
  process.on('unhandledRejection', crash('unhandled rejection; the process exits'));
}
