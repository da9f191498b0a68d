/**
 * Which service the end-to-end suites talk to.
 *
 * - `standalone` (default): each `TestApp` starts the standalone service in this process, on a
 *   data dir of its own.
 * - `distributed` (`SVC_E2E_TARGET=distributed`, set by jest.distributed.config.js): every
 *   `TestApp` of the run is the one topology the run's global setup started (six processes from
 *   `scripts/start-distributed.js`, on Kafka, PostgreSQL and Redis), reached at the gateway's base
 *   URL (`SVC_E2E_BASE_URL`), its data dir (`SVC_E2E_DATA_DIR`: the master key widget tokens are
 *   signed with), its Kafka brokers (`SVC_E2E_KAFKA_BROKERS`: topics watched, commands sent) and
 *   its database (`SVC_E2E_DATABASE_URL`: the event store read), used by test/e2e/case-helpers.ts.
 *   Suites stay apart by the organizations they create.
 *
 * A test that reaches inside the process (the Nest container, the event store, a mailer, a
 * restart in place, a custom environment) cannot run against the topology: it is declared with
 * `inProcess(reason)` instead of `it`, and is skipped there with its reason in its name.
 */
export type E2ETarget = 'standalone' | 'distributed';

export function e2eTarget(): E2ETarget {
  const v = process.env.SVC_E2E_TARGET ?? '';
  if (v === '' || v === 'standalone') return 'standalone';
  if (v === 'distributed') return 'distributed';
  throw new Error(`SVC_E2E_TARGET must be standalone or distributed, not ${v}`);
}

export const onTopology = (): boolean => e2eTarget() === 'distributed';

/** The shared topology's gateway base URL (`http://127.0.0.1:<port>/api`), set by the global setup. */
export function topologyBaseUrl(): string {
  const url = process.env.SVC_E2E_BASE_URL;
  if (!url)
    throw new Error(
      'SVC_E2E_TARGET=distributed but SVC_E2E_BASE_URL is not set: run through jest.distributed.config.js (its global setup starts the topology)',
    );
  return url;
}

/**
 * The shared topology's data dir (`SVC_E2E_DATA_DIR`, set by the global setup): every app of the
 * topology reads its master key (`master.key`) and the dev tools' files there.
 */
export function topologyDataDir(): string {
  const dir = process.env.SVC_E2E_DATA_DIR;
  if (!dir)
    throw new Error(
      'SVC_E2E_TARGET=distributed but SVC_E2E_DATA_DIR is not set: run through jest.distributed.config.js (its global setup starts the topology), or set it to the data dir of the topology at SVC_E2E_BASE_URL',
    );
  return dir;
}

/** The Kafka brokers of the shared topology (`SVC_E2E_KAFKA_BROKERS`, set by the global setup), for suites that watch its topics or send it commands. */
export function topologyKafkaBrokers(): string[] {
  const list = (process.env.SVC_E2E_KAFKA_BROKERS ?? '')
    .split(',')
    .map((b) => b.trim())
    .filter(Boolean);
  if (list.length === 0)
    throw new Error(
      'SVC_E2E_TARGET=distributed but SVC_E2E_KAFKA_BROKERS is not set: run through jest.distributed.config.js (its global setup starts the topology), or set it to the brokers of the topology at SVC_E2E_BASE_URL',
    );
  return list;
}

/** The shared topology's PostgreSQL database (`SVC_E2E_DATABASE_URL`, set by the global setup): its event store, read by suites as the audit CLI reads it. */
export function topologyDatabaseUrl(): string {
  const url = process.env.SVC_E2E_DATABASE_URL;
  if (!url)
    throw new Error(
      'SVC_E2E_TARGET=distributed but SVC_E2E_DATABASE_URL is not set: run through jest.distributed.config.js (its global setup starts the topology), or set it to the database of the topology at SVC_E2E_BASE_URL',
    );
  return url;
}

/**
 * `it` for a test that needs the in-process standalone app; against the topology it is skipped,
 * its name saying why (`reason`: what it reaches inside, e.g. "reads the event store").
 */
export function inProcess(reason: string): (name: string, fn: jest.ProvidesCallback, timeout?: number) => void {
  if (!onTopology()) return (name, fn, timeout) => it(name, fn, timeout);
  return (name, fn, timeout) => it.skip(`${name} [standalone only: ${reason}]`, fn, timeout);
}

/** `describe` for a block whose service is set up its own way (settings, issuer, restarts): skipped against the topology, with `reason`. */
export function describeInProcess(reason: string): (name: string, fn: () => void) => void {
  if (!onTopology()) return (name, fn) => describe(name, fn);
  return (name, fn) => describe.skip(`${name} [standalone only: ${reason}]`, fn);
}
