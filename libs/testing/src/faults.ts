import { ChildProcess, spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { IncomingHttpHeaders, Server, createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { EnrolmentTenant, enrollPatient, tempDataDir } from './index';
import type { DistributedTopology } from './topology';

/**
 * Servers of a fault test's own (test/e2e/fault-*.e2e-spec.ts): a Kafka broker or cluster and a
 * Redis server that the test stops, kills and restarts while its topology runs, on ports and state
 * dirs no other suite or checkout uses, so that nothing else on the machine is disturbed.
 */

const ROOT = resolve(__dirname, '../../..');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function portFree(port: number): Promise<boolean> {
  return new Promise((res) => {
    const s = createServer();
    s.once('error', () => res(false));
    s.listen(port, '127.0.0.1', () => s.close(() => res(true)));
  });
}

/** The first of `count` consecutive free ports on 127.0.0.1, below the ephemeral range (so a client's port does not take one later). */
export async function freePortRun(count: number): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const base = 20_000 + Math.floor(Math.random() * 12_000);
    let ok = true;
    for (let p = base; p < base + count && ok; p++) ok = await portFree(p);
    if (ok) return base;
  }
  throw new Error(`no ${count} consecutive free ports found`);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A Kafka broker (one node) or cluster (three) of the test's own, run by scripts/kafka.js with its
 * own `KAFKA_STATE_DIR` and first port, and the checkout's jars (`KAFKA_LIB_DIR`).
 */
export class OwnKafka {
  readonly stateDir = tempDataDir('svc-fault-kafka-');
  base = 0;
  brokers = '';

  constructor(readonly count: 1 | 3 = 1) {}

  private run(cmd: string): Promise<string> {
    const child = spawn(process.execPath, [join(ROOT, 'scripts', 'kafka.js'), cmd, '--brokers', String(this.count), '--port', String(this.base)], {
      cwd: ROOT,
      env: {
        ...process.env,
        KAFKA_STATE_DIR: this.stateDir,
        KAFKA_LIB_DIR: process.env.KAFKA_LIB_DIR ?? join(ROOT, '.kafka', 'lib'),
        KAFKA_HEAP: process.env.KAFKA_HEAP ?? '384m',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    return new Promise((res, rej) =>
      child.once('exit', (code) => (code === 0 ? res(out) : rej(new Error(`kafka.js ${cmd} exited ${code}:\n${err.slice(-3000)}`)))),
    );
  }

  /** Starts the node(s), or those of them that are down; resolves once every node answers. */
  async start(): Promise<this> {
    if (!this.base) this.base = await freePortRun(2 * this.count);
    const out = await this.run('up');
    const line = out.split('\n').find((l) => l.startsWith('KAFKA_BROKERS='));
    if (!line) throw new Error(`kafka.js up printed no KAFKA_BROKERS:\n${out}`);
    this.brokers = line.slice('KAFKA_BROKERS='.length).trim();
    return this;
  }

  /** SIGTERM to every node (scripts/kafka.js down); resolves once they exited. */
  async stop(): Promise<void> {
    await this.run('down');
  }

  private nodeDir(node: number): string {
    return join(this.stateDir, this.count === 1 ? 'single' : `cluster-${this.count}`, `node-${node}`);
  }

  /** The JVM's pid of node `node` (1-based), or null when it is not running. */
  pid(node: number): number | null {
    try {
      const pid = Number(readFileSync(join(this.nodeDir(node), 'kafka.pid'), 'utf8').trim());
      return pid > 0 && alive(pid) ? pid : null;
    } catch {
      return null;
    }
  }

  /** SIGKILL to node `node`'s JVM; resolves once it is gone. */
  async kill9(node: number): Promise<number> {
    const pid = this.pid(node);
    if (pid === null) throw new Error(`kafka node ${node} is not running`);
    process.kill(pid, 'SIGKILL');
    while (alive(pid)) await sleep(50);
    return pid;
  }

  /** Stops whatever still runs and deletes the state dir. */
  async destroy(): Promise<void> {
    if (this.base) await this.stop().catch(() => undefined);
    rmSync(this.stateDir, { recursive: true, force: true });
  }
}

/** A redis-server of the test's own on a free port, without persistence: a restart starts it empty. */
export class OwnRedis {
  private child: ChildProcess | undefined;
  readonly dir = tempDataDir('svc-fault-redis-');
  port = 0;

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    if (!this.port) this.port = await freePortRun(1);
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir], {
      stdio: 'ignore',
    });
    this.child = child;
    const { default: Redis } = await import('ioredis');
    const until = Date.now() + 15_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`redis-server exited (${child.exitCode}) on port ${this.port}`);
      const r = new Redis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      try {
        await r.connect();
        if ((await r.ping()) === 'PONG') return this;
      } catch {
        // not yet
      } finally {
        r.disconnect();
      }
      if (Date.now() > until) throw new Error(`redis-server did not answer on port ${this.port}`);
      await sleep(100);
    }
  }

  /** SIGKILL; resolves once it exited. */
  async kill9(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }

  async destroy(): Promise<void> {
    await this.kill9();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** One webhook arrival at the receiver. */
export interface WebhookArrival {
  eventId: string;
  type: string;
  body: { id: string; type: string; data: Record<string, unknown> };
  raw: string;
  headers: IncomingHttpHeaders;
  /** Real time the request arrived, and the time it was answered (0 while it is not). */
  at: number;
  answeredAt: number;
  status: number;
}

export interface WebhookReceiverOptions {
  /** How long each answer takes (ms). Default 0. */
  delayMs?: number;
  /** The status to answer an arrival with (default 200); `nth` counts the arrivals of its event id from 1. */
  answer?: (eventId: string, nth: number) => number;
}

/** A webhook receiver on loopback that keeps every arrival (duplicates included); it answers 200 unless told otherwise. */
export class WebhookReceiver {
  private server: Server | undefined;
  readonly arrivals: WebhookArrival[] = [];
  url = '';

  constructor(readonly options: WebhookReceiverOptions = {}) {}

  async start(): Promise<this> {
    const server = createHttpServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        let arrival: WebhookArrival | undefined;
        try {
          const body = JSON.parse(raw);
          arrival = {
            eventId: String(req.headers['x-svc-event-id'] ?? body.id),
            type: body.type,
            body,
            raw,
            headers: req.headers,
            at: Date.now(),
            answeredAt: 0,
            status: 0,
          };
          this.arrivals.push(arrival);
        } catch {
          // not JSON: not counted
        }
        const nth = arrival ? this.arrivals.filter((a) => a.eventId === arrival!.eventId).length : 1;
        const status = arrival && this.options.answer ? this.options.answer(arrival.eventId, nth) : 200;
        setTimeout(() => {
          if (arrival) Object.assign(arrival, { answeredAt: Date.now(), status });
          res.writeHead(status, { 'content-type': 'application/json' }).end('{"ok":true}');
        }, this.options.delayMs ?? 0);
      });
    });
    this.server = server;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hooks`;
    return this;
  }

  /** Event ids that arrived more than once, with their counts. */
  duplicates(): Record<string, number> {
    const counts = new Map<string, number>();
    for (const a of this.arrivals) counts.set(a.eventId, (counts.get(a.eventId) ?? 0) + 1);
    return Object.fromEntries([...counts].filter(([, n]) => n > 1));
  }

  /** Case ids of the arrivals of one event type. */
  caseIds(type: string): string[] {
    return this.arrivals.filter((a) => a.type === type).map((a) => String(a.body.data?.caseId));
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }
}

/** Polls `check` until it returns true (or throws its last failure after `timeoutMs`). */
export async function eventually(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string, everyMs = 250): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > until) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await sleep(everyMs);
  }
}

/** An organization with a signed BAA, a sandbox API key and the staff token of its owner, made through the topology's gateway. */
export async function topologyTenant(
  topology: DistributedTopology,
  ownerSub = `owner-${Math.random().toString(36).slice(2)}`,
): Promise<EnrolmentTenant & { orgId: string; ownerSub: string }> {
  const api = topology.api;
  const staff = await topology.staffToken(ownerSub);
  const org = await api.post('/organizations', { name: 'Fault Clinic' }, staff);
  if (org.status !== 201) throw new Error(`org: ${org.status} ${org.text}`);
  const sandbox = org.body.environments.find((e: { kind: string }) => e.kind === 'sandbox').id as string;
  const env = `/organizations/${org.body.id}/environments/${sandbox}`;
  const baa = await api.post(`/organizations/${org.body.id}/baa`, { signerName: 'Ada Owner', signerTitle: 'CEO' }, staff);
  if (baa.status !== 201) throw new Error(`baa: ${baa.status} ${baa.text}`);
  const key = await api.post(`${env}/api-keys`, { name: 'faults' }, staff);
  if (key.status !== 201) throw new Error(`key: ${key.status} ${key.text}`);
  return { staff, ownerSub, orgId: org.body.id as string, env, apiKey: key.body.key as string };
}

/**
 * The topology's output lines saying that an app exited (the command restarted it), each followed
 * by the 12 output lines before it (where a crashed app's last words are), so a failure says why.
 */
export function appExits(topology: DistributedTopology): string[] {
  const lines = topology.output.split('\n');
  return lines.flatMap((line, i) =>
    /^distributed: \S+ exited /.test(line) ? [[line, ...lines.slice(Math.max(0, i - 12), i).map((before) => `  before it: ${before}`)].join('\n')] : [],
  );
}

/** Writes the topology's whole output (its lines and the apps' log lines) to a file in the temp dir, for a failure's post-mortem; returns its path. */
export function keepOutput(topology: DistributedTopology | undefined, name: string): string | undefined {
  if (!topology) return undefined;
  const file = join(tmpdir(), `${name}-${process.pid}.log`);
  writeFileSync(file, topology.output);
  return file;
}

export interface FaultSuiteOptions {
  /** Kafka brokers of the suite's own (default 1). */
  brokers?: 1 | 3;
  /** A redis-server of the suite's own (REDIS_URL of the topology), not the shared one. */
  redis?: boolean;
  receiver?: WebhookReceiverOptions;
  /** More environment for the topology (SVC_REPLICAS, ...). */
  env?: Record<string, string>;
}

export interface FaultSuite {
  readonly kafka: OwnKafka;
  readonly receiver: WebhookReceiver;
  readonly redis: OwnRedis | undefined;
  /** Set once beforeAll has started it. */
  topology: DistributedTopology;
}

/**
 * The world of one fault suite (test/e2e/fault-*.e2e-spec.ts): its own Kafka broker(s), webhook
 * receiver and, if asked, Redis, and a six-process topology on them. Registers the beforeAll that
 * starts them (saying how long the broker and the topology took) and the afterAll that stops
 * them, keeping the topology's output in the temp dir under `name`. Call inside the describe.
 */
export function faultSuite(name: string, options: FaultSuiteOptions = {}): FaultSuite {
  const suite: FaultSuite = {
    kafka: new OwnKafka(options.brokers ?? 1),
    receiver: new WebhookReceiver(options.receiver),
    redis: options.redis ? new OwnRedis() : undefined,
    topology: undefined as unknown as DistributedTopology,
  };
  beforeAll(async () => {
    const t0 = Date.now();
    await Promise.all([suite.kafka.start(), suite.receiver.start(), suite.redis?.start()]);
    const t1 = Date.now();
    const { DistributedTopology } = await import('./topology');
    suite.topology = new DistributedTopology({ KAFKA_BROKERS: suite.kafka.brokers, ...(suite.redis ? { REDIS_URL: suite.redis.url } : {}), ...options.env });
    await suite.topology.start(150_000);
    process.stdout.write(`${name}: broker up in ${Math.round((t1 - t0) / 1000)} s, topology in ${Math.round((Date.now() - t1) / 1000)} s\n`);
  }, 300_000);
  afterAll(async () => {
    const topology = suite.topology as DistributedTopology | undefined;
    await topology?.stop();
    keepOutput(topology, name);
    await topology?.cleanup().catch(() => undefined);
    await suite.receiver.stop();
    await suite.redis?.destroy();
    await suite.kafka.destroy();
  }, 90_000);
  return suite;
}

/**
 * A tenant of the suite's topology (`topologyTenant`) whose sandbox has a webhook endpoint at the
 * suite's receiver for `events`, and one enrolled patient.
 */
export async function subscribedTenant(
  suite: FaultSuite,
  events: string[] = ['clinical_case.opened', 'clinical_case.acknowledged'],
): Promise<{ t: Awaited<ReturnType<typeof topologyTenant>>; patientId: string }> {
  const t = await topologyTenant(suite.topology);
  const ep = await suite.topology.api.post(`${t.env}/webhook-endpoints`, { url: suite.receiver.url, events }, t.staff);
  if (ep.status !== 201) throw new Error(`webhook endpoint: ${ep.status} ${ep.text}`);
  const { patientId } = await enrollPatient(suite.topology.api, t);
  return { t, patientId };
}
