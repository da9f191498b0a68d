import { execFileSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { DistributedTopology } from '../../libs/testing/src/topology';

/**
 * Jest global setup of the distributed target (jest.distributed.config.js): starts one topology
 * for the whole run, `scripts/start-distributed.js --no-build` with a database, a Redis key
 * prefix and a data dir of its own, on the broker of KAFKA_BROKERS (the test command's) or the
 * local one, and hands its gateway address to the suites (SVC_E2E_BASE_URL, read by TestApp), its
 * data dir (SVC_E2E_DATA_DIR), its brokers (SVC_E2E_KAFKA_BROKERS) and its database
 * (SVC_E2E_DATABASE_URL; libs/testing e2e-target.ts).
 * The pages for people are built first when web/ changed (the browser suites do not build them
 * under a running topology: test/browser/browser.ts).
 *
 * A topology that does not start fails the run: the distributed target is never skipped.
 * `SVC_E2E_BASE_URL` set by the caller: that running topology is used and nothing is started (the
 * caller sets SVC_E2E_DATA_DIR, SVC_E2E_KAFKA_BROKERS and SVC_E2E_DATABASE_URL too, for the suites that need them).
 */
export default async function globalSetup(): Promise<void> {
  process.env.SVC_E2E_TARGET = 'distributed';
  if (process.env.SVC_E2E_BASE_URL) {
    process.stdout.write(`\ndistributed e2e: using the topology at ${process.env.SVC_E2E_BASE_URL}\n`);
    return;
  }
  // The pages for people (dist/web) as web/ is now, before any process reads them: the gateway and
  // patient-pathway each read dist/web once, and a page of one names the assets the other serves.
  const root = resolve(__dirname, '..', '..');
  execFileSync(process.execPath, [join(root, 'scripts', 'build-web.js'), '--if-needed'], { cwd: root, stdio: 'inherit' });
  const brokers = process.env.KAFKA_BROKERS;
  const topology = new DistributedTopology(brokers ? { KAFKA_BROKERS: brokers } : {});
  (globalThis as { __svcTopology?: DistributedTopology }).__svcTopology = topology;
  const t0 = performance.now();
  try {
    await topology.start(240_000);
  } catch (err) {
    await topology.stop().catch(() => undefined);
    await topology.cleanup().catch(() => undefined);
    throw new Error(`the distributed target did not start: ${(err as Error).message}`);
  }
  process.env.SVC_E2E_BASE_URL = topology.baseUrl;
  process.env.SVC_E2E_DATA_DIR = topology.dataDir;
  const db = new URL(process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres');
  db.pathname = `/${topology.dbName}`;
  process.env.SVC_E2E_DATABASE_URL = db.toString();
  // The broker the apps were given (the command's own local one when KAFKA_BROKERS is unset).
  process.env.SVC_E2E_KAFKA_BROKERS = brokers ?? topology.output.match(/^distributed: kafka (\S+) /m)?.[1] ?? '';
  process.stdout.write(
    `\ndistributed e2e: six processes ready at ${topology.baseUrl} in ${((performance.now() - t0) / 1000).toFixed(1)} s (database ${topology.dbName}, Redis prefix ${topology.redisKeyPrefix})\n`,
  );
}
