import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { StartedTestContainer } from 'testcontainers';
import { KurrentEventStore } from '@svc/eventstore';
import { describeEventStoreConformance } from './conformance';

/**
 * KurrentDB conformance, against the server `KURRENTDB_URL` names (a KurrentDB connection string,
 * e.g. `kurrentdb://127.0.0.1:2113?tls=false`), else through testcontainers where a Docker engine
 * answers. Detection is synchronous and fast (Jest registers suites synchronously): find a Docker
 * endpoint (DOCKER_HOST or a known socket) and ping it with a 1.5 s budget. With neither, the
 * suite says so in one line and is skipped: KurrentDB is the one server that cannot run on the
 * project's machines.
 */
function dockerEngineReachable(): boolean {
  const candidates: string[] = [];
  if (process.env.DOCKER_HOST) candidates.push(process.env.DOCKER_HOST);
  for (const sock of [
    '/var/run/docker.sock',
    join(homedir(), '.docker', 'run', 'docker.sock'),
    join(homedir(), '.docker', 'desktop', 'docker.sock'),
    process.env.XDG_RUNTIME_DIR ? join(process.env.XDG_RUNTIME_DIR, 'docker.sock') : '',
  ]) {
    if (sock && existsSync(sock)) candidates.push(`unix://${sock}`);
  }
  const ping = `
    const http = require('node:http');
    const h = process.argv[1];
    const u = h.startsWith('unix://') ? null : new URL(h.replace(/^tcp:/, 'http:'));
    const req = http.get(u ? { host: u.hostname, port: u.port || 2375, path: '/_ping' } : { socketPath: h.slice(7), path: '/_ping' },
      (res) => process.exit(res.statusCode === 200 ? 0 : 1));
    req.on('error', () => process.exit(1));
    req.setTimeout(1500, () => process.exit(1));`;
  for (const host of candidates) {
    const r = spawnSync(process.execPath, ['-e', ping, host], { timeout: 2500, stdio: 'ignore' });
    if (r.status === 0) return true;
  }
  return false;
}

const IMAGE = process.env.KURRENTDB_IMAGE ?? 'docker.kurrent.io/kurrent-latest/kurrentdb:latest';
const givenUrl = process.env.KURRENTDB_URL?.trim() || null;
const dockerAvailable = givenUrl === null && dockerEngineReachable();
// Straight to stdout: Jest does not show the console output of a suite whose tests all skip.
if (!givenUrl && !dockerAvailable) process.stdout.write('KurrentDB conformance suite skipped: KURRENTDB_URL is not set and no Docker engine is reachable\n');

(givenUrl || dockerAvailable ? describe : describe.skip)(`KurrentDB adapter (${givenUrl ? 'KURRENTDB_URL' : 'testcontainers'})`, () => {
  let container: StartedTestContainer | undefined;
  let connectionString = givenUrl ?? '';

  beforeAll(async () => {
    if (givenUrl) return;
    const { GenericContainer, Wait } = await import('testcontainers');
    const envPrefix = IMAGE.includes('eventstore/eventstore') ? 'EVENTSTORE' : 'KURRENTDB';
    container = await new GenericContainer(IMAGE)
      .withEnvironment({
        [`${envPrefix}_CLUSTER_SIZE`]: '1',
        [`${envPrefix}_RUN_PROJECTIONS`]: 'None',
        [`${envPrefix}_INSECURE`]: 'true',
        [`${envPrefix}_MEM_DB`]: 'true',
        [`${envPrefix}_NODE_PORT`]: '2113',
      })
      .withExposedPorts(2113)
      .withWaitStrategy(Wait.forHttp('/health/live', 2113).forStatusCodeMatching((c) => c >= 200 && c < 300))
      .withStartupTimeout(120_000)
      .start();
    connectionString = `kurrentdb://${container.getHost()}:${container.getMappedPort(2113)}?tls=false`;
  }, 180_000);

  afterAll(async () => {
    await container?.stop();
  });

  describeEventStoreConformance('KurrentDB', async () => {
    const store = new KurrentEventStore(connectionString);
    return {
      store,
      reopen: async () => new KurrentEventStore(connectionString),
      cleanup: () => store.close(),
    };
  });
});
