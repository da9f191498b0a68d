import type { DistributedTopology } from '../../libs/testing/src/topology';

/** Jest global teardown of the distributed target: stops the run's topology and drops its database, keys and data dir. */
export default async function globalTeardown(): Promise<void> {
  const topology = (globalThis as { __svcTopology?: DistributedTopology }).__svcTopology;
  if (!topology) return;
  const code = await topology.stop();
  await topology.cleanup();
  // Apps that crashed during the run were started again by the command; a stop that failed is the run's failure.
  if (code !== 0) throw new Error(`start-distributed ended with ${code} on SIGTERM:\n${topology.output.slice(-3000)}`);
}
