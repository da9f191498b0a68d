/**
 * Scaling out on one machine: durable case updates per second through the gateway with
 * case-ledger at 1 and at 2 replicas, and webhook deliveries per second with webhook-dispatcher
 * at 1 and at 2 replicas, in one run (scripts/start-distributed.js with SVC_REPLICAS; Kafka,
 * PostgreSQL, Redis).
 *
 *   npm run bench:replicas -- [--seconds 10] [--connections 32] [--cases 300] [--deliveries 400]
 *
 * Two topologies, one after the other: every app once, then case-ledger=2,webhook-dispatcher=2.
 * In each:
 *   - updates: a tenant with `--cases` open cases, then autocannon POSTs updates at full speed
 *     (each case in sequence; an update answers once durable and in the progress read model);
 *   - deliveries: `--deliveries` cases opened through the gateway towards a webhook endpoint on a
 *     receiver in this process that answers 503 at first, so every delivery is waiting for its
 *     third attempt (5 min after the second); then the receiver answers 200, the dev clock moves
 *     7 minutes, and deliveries/s = deliveries / (clock moved -> last one received). That is the
 *     dispatchers' own rate (timers, signing, HTTP), not the rate at which cases open.
 * Rate limits off, log level warn. The core count and load average are printed: the machine is
 * shared, so read the figures as one run's. A benchmark, not a test: never in CI.
 */
import { createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { CannonFigures, Distributed, cannon, cannonFigures, caseUpdateRequests, json, openCases, seedTenant, sleep, startDistributed } from './support';

interface Args {
  seconds: number;
  connections: number;
  cases: number;
  deliveries: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { seconds: 10, connections: 32, cases: 300, deliveries: 400 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => Number(argv[++i]);
    if (a === '--seconds') args.seconds = v();
    else if (a === '--connections') args.connections = v();
    else if (a === '--cases') args.cases = v();
    else if (a === '--deliveries') args.deliveries = v();
    else throw new Error(`unknown argument ${a}`);
  }
  return args;
}

interface Topology extends Distributed {
  replicas: string;
}

/** start-distributed with SVC_REPLICAS; resolves with the gateway's base URL once every process is ready. */
async function startTopology(replicas: string): Promise<Topology> {
  const topology = await startDistributed({ dirPrefix: 'svc-bench-replicas-', timeoutMs: 300_000, env: { SVC_REPLICAS: replicas } });
  return { replicas, ...topology };
}

type UpdatesRow = CannonFigures;

async function updates(base: string, args: Args): Promise<UpdatesRow> {
  const t = await seedTenant(base, { name: 'updates', patients: 20 });
  const cases = await openCases(t, args.cases, 16);
  const url = new URL(base);
  const headers = { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' };
  const requests = caseUpdateRequests(url.pathname, cases);
  await cannon({ url: url.origin, connections: args.connections, duration: 2, headers, requests });
  const r = await cannon({ url: url.origin, connections: args.connections, duration: args.seconds, headers, requests });
  return cannonFigures(r, args.seconds);
}

interface DeliveriesRow {
  deliveries: number;
  seconds: number;
  rps: number;
  /** Event ids received with 200 more than once. */
  duplicates: number;
}

async function deliveries(base: string, args: Args): Promise<DeliveriesRow> {
  let accept = false;
  const attempts = new Map<string, number>();
  const delivered = new Map<string, number>();
  let lastDelivered = 0;
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const id = String(req.headers['x-svc-event-id']);
      if (!accept) {
        attempts.set(id, (attempts.get(id) ?? 0) + 1);
        res.writeHead(503).end();
        return;
      }
      delivered.set(id, (delivered.get(id) ?? 0) + 1);
      lastDelivered = performance.now();
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  try {
    const t = await seedTenant(base, { name: 'webhooks', patients: 20 });
    await json(
      'POST',
      `${t.E}/webhook-endpoints`,
      { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`, events: ['clinical_case.opened'] },
      t.staff,
    );
    await openCases(t, args.deliveries, 16);
    // Every delivery failed twice (at once, then 5 s later): its next attempt is 5 min away.
    for (const until = Date.now() + 120_000; ;) {
      const twice = [...attempts.values()].filter((n) => n >= 2).length;
      if (twice >= args.deliveries) break;
      if (Date.now() > until) throw new Error(`only ${twice} of ${args.deliveries} deliveries failed twice within 120 s`);
      await sleep(250);
    }
    accept = true;
    const t0 = performance.now();
    await json('POST', `${base}/dev/clock`, { advanceSeconds: 7 * 60 });
    for (const until = Date.now() + 300_000; delivered.size < args.deliveries;) {
      if (Date.now() > until) throw new Error(`only ${delivered.size} of ${args.deliveries} delivered within 300 s`);
      await sleep(50);
    }
    const seconds = (lastDelivered - t0) / 1000;
    await sleep(2000);
    return { deliveries: delivered.size, seconds, rps: delivered.size / seconds, duplicates: [...delivered.values()].filter((n) => n > 1).length };
  } finally {
    receiver.closeAllConnections();
    await new Promise((r) => receiver.close(r));
  }
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  console.log(
    `cores ${cpus().length} (${cpus()[0]?.model ?? '?'}); ${args.cases} cases, ${args.connections} connections, ${args.seconds} s per update run; ${args.deliveries} deliveries per burst`,
  );
  const rows: { replicas: string; updates: UpdatesRow; deliveries: DeliveriesRow; load: string }[] = [];
  for (const replicas of ['', 'case-ledger=2,webhook-dispatcher=2']) {
    const topology = await startTopology(replicas);
    try {
      console.log(`topology ${replicas || 'one replica each'} at ${topology.base}`);
      const u = await updates(topology.base, args);
      console.log(`  updates ${Math.round(u.rps)}/s`);
      const d = await deliveries(topology.base, args);
      console.log(`  deliveries ${Math.round(d.rps)}/s`);
      rows.push({
        replicas: replicas || 'every app once',
        updates: u,
        deliveries: d,
        load: loadavg()
          .map((x) => x.toFixed(1))
          .join(' '),
      });
    } finally {
      await topology.stop();
    }
  }
  console.log(
    '\n| replicas | updates 2xx/s | p50 ms | p99 ms | non-2xx | errors | deliveries/s | burst (deliveries in s) | delivered twice | load avg after |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---|---:|---|');
  for (const r of rows) {
    console.log(
      `| ${r.replicas} | ${Math.round(r.updates.rps).toLocaleString('en-US')} | ${r.updates.p50} | ${r.updates.p99} | ${r.updates.non2xx} | ${r.updates.errors} | ${Math.round(r.deliveries.rps).toLocaleString('en-US')} | ${r.deliveries.deliveries} in ${r.deliveries.seconds.toFixed(1)} | ${r.deliveries.duplicates} | ${r.load} |`,
    );
  }
  const [one, two] = rows;
  if (one && two)
    console.log(
      `updates: 2 case-ledger replicas ${(two.updates.rps / one.updates.rps).toFixed(2)}x one; deliveries: 2 webhook-dispatcher replicas ${(two.deliveries.rps / one.deliveries.rps).toFixed(2)}x one`,
    );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
