/**
 * A process that installs the services' crash handler (exitOnCrash), then fails the way argv[2]
 * says: `rejection` (a promise rejected with nobody to handle it) or `exception` (a throw from a
 * timer). The error's message holds what must never reach a log. crash.spec.ts runs it.
 */
import { exitOnCrash } from '../../src/crash';

exitOnCrash();
const message = 'patient Jane Roe, born 1950-01-01\nsecond line of the message';
if (process.argv[2] === 'rejection') void Promise.reject(new RangeError(message));
else
  setTimeout(() => {
    throw new TypeError(message);
  }, 10);
