#!/usr/bin/env node
// Over 400 lines: one command that prepares, starts and supervises the topology, its doc comment doubling as --help.
/**
 * `npm run start:distributed`: distributed mode on this machine (decisions section 1), the six
 * apps as six processes on Kafka, PostgreSQL and Redis, the gateway the one public address.
 *
 *   PORT=3100 SVC_DEV_TOOLS=1 npm run start:distributed
 *
 * 1. Builds if needed (scripts/build.js --if-needed; `--no-build`: runs dist as it is).
 * 2. Kafka: the brokers of KAFKA_BROKERS, else the local broker (scripts/kafka.js, started if it
 *    is down; a broker started here is stopped when this run ends, unless another user holds it).
 * 3. PostgreSQL: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres); with
 *    SVC_DB_NAME, that database on the same server, created if missing. The event store's schema
 *    (EVENT_STORE_SCHEMA, default svc_events) is created or migrated before the apps start.
 * 4. Kafka topics (deploy/topics.md) are created before the apps start: an app cannot subscribe
 *    to a topic that does not exist yet.
 * 5. Redis: REDIS_URL (default redis://127.0.0.1:6379), keys under REDIS_KEY_PREFIX (default svc).
 * 6. Starts patient-pathway, case-ledger, conversation, workflow-engine and webhook-dispatcher on
 *    internal ports of 127.0.0.1 (free ports picked at start), waits until each answers
 *    GET /api/readyz, then the gateway on PORT (default 3000; HOST default 127.0.0.1), and prints
 *    `... listening at <base URL>` once it is ready too.
 * 7. An app that exits is started again on its port (like a container restart policy); one that
 *    keeps failing within seconds of its start stops the run. SIGINT or SIGTERM stops the six
 *    apps (the gateway signalled first; SIGKILL after 15 s) and ends this process. The apps end
 *    with it in any case: each watches its IPC channel to this process (./exit-with-parent.js).
 *
 * Replicas: `--replicas case-ledger=2,webhook-dispatcher=2` (or SVC_REPLICAS with the same
 * syntax; the option wins) runs that many processes of an app, 1 to 6 each (an app's reply
 * consumers need a partition of each 6-partition reply topic apiece). Each replica is a process
 * of its own on an internal port of its own, with its own restart policy and readiness, and an
 * instance id (SVC_INSTANCE_ID): the app's name when it runs once, else `<app>-<n>`
 * (`case-ledger-2`), which its log lines and its route announcement carry; the gateway spreads
 * an app's routes over its live replicas. Gateway replicas (`gateway=2`) listen on PORT and on
 * free ports after it, each a public address of its own (a load balancer goes in front).
 *
 * `<data dir>/distributed-state.json` lists every process as it runs now, rewritten on each
 * start, exit and restart: `{ pid, publicBase, instances: [{ app, instance, pid, port, url,
 * state: "starting" | "ready" | "exited" }] }` (fault tests kill a replica by its pid).
 *
 * Every app shares one data dir (SVC_DATA_DIR, default ./data/distributed): the dev tools'
 * issuer key and outbox, and the generated master key when SVC_MASTER_KEY is not set. Two runs
 * on one machine are kept apart by their PORT, data dir, REDIS_KEY_PREFIX and SVC_DB_NAME (or
 * DATABASE_URL), and need a Kafka broker each: topics and consumer groups are named after the
 * apps, so a run refuses a broker whose groups another run's apps are in. Every other variable of
 * deploy/README.md passes through to the six apps.
 *
 * Output: this script's own lines start with `distributed:` (`distributed: <instance> pid <pid>
 * port <port> <url>` once ready, `... pid <pid> ready again on port <port>` after a restart); the
 * apps' JSON log lines pass through.
 */
'use strict';
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const INTERNAL_APPS = ['patient-pathway', 'case-ledger', 'conversation', 'workflow-engine', 'webhook-dispatcher'];
const READY_TIMEOUT_MS = Number(process.env.SVC_START_TIMEOUT_MS) || 180_000;
const STOP_GRACE_MS = 15_000;
/** An app that exits this soon after it was started counts as failing; this many in a row end the run. */
const QUICK_EXIT_MS = 15_000;
const QUICK_EXITS_ALLOWED = 5;

const say = (msg) => process.stdout.write(`distributed: ${msg}\n`);
const fail = (msg) => {
  process.stderr.write(`distributed: ${msg}\n`);
};

const ALL_APPS = [...INTERNAL_APPS, 'gateway'];
/** At most this many replicas of one app: each needs a partition of every reply topic (6, deploy/topics.md). */
const MAX_REPLICAS = 6;

/** `case-ledger=2,webhook-dispatcher=2` as `{ 'case-ledger': 2, ... }` (every other app: 1). */
function parseReplicas(text, source) {
  const counts = Object.fromEntries(ALL_APPS.map((a) => [a, 1]));
  for (const part of String(text)
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^([a-z-]+)=(\d+)$/.exec(part);
    if (!m) throw new Error(`${source}: "${part}" is not <app>=<count>`);
    if (!ALL_APPS.includes(m[1])) throw new Error(`${source}: unknown app ${m[1]} (one of ${ALL_APPS.join(', ')})`);
    const n = Number(m[2]);
    if (!Number.isInteger(n) || n < 1 || n > MAX_REPLICAS) throw new Error(`${source}: ${m[1]} needs 1 to ${MAX_REPLICAS} replicas, got ${m[2]}`);
    counts[m[1]] = n;
  }
  return counts;
}

function parseArgs(argv) {
  const options = { build: true, replicas: parseReplicas(process.env.SVC_REPLICAS ?? '', 'SVC_REPLICAS') };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--no-build') {
      options.build = false;
      continue;
    }
    if (a === '--replicas' || a.startsWith('--replicas=')) {
      const value = a === '--replicas' ? argv[++i] : a.slice('--replicas='.length);
      if (value === undefined) throw new Error('--replicas needs <app>=<count>[,<app>=<count>...]');
      options.replicas = parseReplicas(value, '--replicas');
      continue;
    }
    if (a === '--help' || a === '-h') {
      const lines = fs.readFileSync(__filename, 'utf8').split('\n');
      const text = lines.slice(lines.indexOf('/**') + 1, lines.indexOf(' */'));
      process.stdout.write(text.map((l) => l.replace(/^ \* ?/, '')).join('\n') + '\n');
      process.exit(0);
    }
    throw new Error(`unknown option ${a} (--no-build and --replicas only: settings come from the environment; see --help)`);
  }
  return options;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** The database URL the apps use: DATABASE_URL, with SVC_DB_NAME as its database when set. */
function databaseUrl(env) {
  const url = new URL(env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres');
  const name = env.SVC_DB_NAME;
  if (name !== undefined && name !== '') {
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name))
      throw new Error('SVC_DB_NAME must be lower-case letters, digits and _, not starting with a digit, at most 63 characters');
    url.pathname = `/${name}`;
  }
  return url.toString();
}

/** Creates the database of `url` when it does not exist (connected to the server's `postgres` database). */
async function ensureDatabase(url) {
  const { Client } = require('pg');
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.slice(1)) || 'postgres';
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new Client({ connectionString: admin.toString(), connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rowCount === 0) {
      try {
        await client.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
        say(`created database ${name}`);
      } catch (err) {
        // Another run created it meanwhile.
        if (err.code !== '42P04') throw err;
      }
    }
  } finally {
    await client.end();
  }
}

/** Creates or migrates the event store's schema (the apps would too, at start; done once here). */
async function ensureSchema(url, schema) {
  const { PostgresEventStore } = require(path.join(ROOT, 'dist', 'libs', 'eventstore', 'src'));
  const store = await PostgresEventStore.open({ connectionString: url, ...(schema ? { schema } : {}) });
  await store.close();
}

/**
 * Every topic of deploy/topics.md, created where missing. The messaging library's own list and
 * creation (topicSpecs, ensureTopics) when it has them; else the names of names.ts with the
 * page's settings (events 6 partitions for 7 days, commands 6 for a day, replies 6 for an hour).
 */
async function ensureTopics(brokers) {
  const messaging = require(path.join(ROOT, 'dist', 'libs', 'messaging', 'src'));
  if (typeof messaging.ensureTopics === 'function' && typeof messaging.topicSpecs === 'function') {
    const r = await messaging.ensureTopics({ brokers, topics: messaging.topicSpecs() });
    return { created: r.created.length, existing: r.existing.length };
  }
  const { Kafka, logLevel } = require('kafkajs');
  const DAY = 86_400_000;
  const specs = [
    ...Object.values(messaging.Topics).map((topic) => ({ topic, partitions: 6, retentionMs: 7 * DAY })),
    ...Object.values(messaging.Patterns).flatMap((topic) => [
      { topic, partitions: 6, retentionMs: DAY },
      { topic: `${topic}.reply`, partitions: 6, retentionMs: DAY / 24 },
    ]),
  ];
  const admin = new Kafka({ clientId: 'start-distributed', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const missing = specs.filter((s) => !existing.has(s.topic));
    if (missing.length) {
      await admin.createTopics({
        waitForLeaders: true,
        topics: missing.map((s) => ({
          topic: s.topic,
          numPartitions: s.partitions,
          configEntries: [
            { name: 'retention.ms', value: String(s.retentionMs) },
            { name: 'cleanup.policy', value: 'delete' },
          ],
        })),
      });
    }
    return { created: missing.length, existing: specs.length - missing.length };
  } finally {
    await admin.disconnect();
  }
}

/**
 * The apps' consumer groups are named after the apps, and the topics after names.ts: two
 * topologies on one broker would take each other's messages. Refuses to start while another
 * one's consumers are in the groups (after waiting for those of a run that just ended to leave).
 */
async function brokerFree(brokers) {
  const { Kafka, logLevel } = require('kafkajs');
  const admin = new Kafka({ clientId: 'start-distributed', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const groups = [...INTERNAL_APPS, 'gateway'].map((a) => `${a}-server`);
    const deadline = Date.now() + 45_000;
    for (;;) {
      const { groups: described } = await admin.describeGroups(groups);
      const busy = described.filter((g) => g.members.length > 0).map((g) => g.groupId);
      if (busy.length === 0) return;
      if (Date.now() > deadline) {
        throw new Error(
          `another topology's apps consume from this Kafka broker (groups ${busy.join(', ')} have members): stop it, or give this run a broker of its own (KAFKA_BROKERS)`,
        );
      }
      await sleep(1000);
    }
  } finally {
    await admin.disconnect();
  }
}

async function ensureRedis(url) {
  const Redis = require('ioredis');
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 5000, retryStrategy: () => null });
  try {
    await redis.connect();
    await redis.ping();
  } finally {
    redis.disconnect();
  }
}

/** GET /api/readyz answered 200 (or, for an app without it, any answer below 500 to /api/healthz). */
async function ready(port) {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/api/readyz`, { signal: AbortSignal.timeout(3000) });
    await r.arrayBuffer();
    if (r.status === 200) return true;
    if (r.status !== 404) return false;
    const h = await fetch(`http://127.0.0.1:${port}/api/healthz`, { signal: AbortSignal.timeout(3000) });
    await h.arrayBuffer();
    return h.status < 500;
  } catch {
    return false;
  }
}

/** One process of an app: `name` is the app, `instance` its instance id (the label of its lines). */
class App {
  constructor(name, instance, port, env) {
    this.name = name;
    this.instance = instance;
    this.port = port;
    this.env = env;
    this.state = 'starting';
    this.child = null;
    this.startedAt = 0;
    this.quickExits = 0;
    this.tail = [];
  }

  start() {
    const main = path.join(ROOT, 'dist', 'apps', this.name, 'main.js');
    this.tail = [];
    // detached: a Ctrl-C in the terminal reaches this process only, which stops the apps in order.
    const child = spawn(process.execPath, ['--require', path.join(__dirname, 'exit-with-parent.js'), main], {
      cwd: ROOT,
      env: { ...this.env, PORT: String(this.port), SVC_INSTANCE_ID: this.instance },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      detached: true,
    });
    this.child = child;
    this.startedAt = Date.now();
    const pass = (stream, out) => {
      let rest = '';
      stream.on('data', (d) => {
        const text = rest + d.toString();
        const lines = text.split('\n');
        rest = lines.pop();
        for (const line of lines) {
          out.write(`${line}\n`);
          this.tail.push(line);
          if (this.tail.length > 20) this.tail.shift();
        }
      });
      stream.on('end', () => rest && out.write(`${rest}\n`));
    };
    pass(child.stdout, process.stdout);
    pass(child.stderr, process.stderr);
    child.unref();
    return child;
  }

  get pid() {
    return this.child?.pid;
  }

  running() {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  async waitReady(deadline) {
    while (Date.now() < deadline) {
      if (!this.running()) throw new Error(`${this.instance} exited during start-up:\n${this.tail.join('\n')}`);
      if (await ready(this.port)) return;
      await sleep(250);
    }
    throw new Error(`${this.instance} was not ready within ${Math.round(READY_TIMEOUT_MS / 1000)} s:\n${this.tail.join('\n')}`);
  }

  stop(signal = 'SIGTERM') {
    if (this.running()) this.child.kill(signal);
  }

  exited() {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((r) => child.once('exit', () => r()));
  }
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined && v !== ''));
  const publicPort = env.PORT !== undefined ? Number(env.PORT) : 3000;
  if (!Number.isInteger(publicPort) || publicPort < 0 || publicPort > 65535) throw new Error('PORT must be a whole number from 0 to 65535');

  if (options.build) {
    const build = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'build.js'), '--if-needed'], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
    if (build.status !== 0) throw new Error('the build failed');
  } else if (!fs.existsSync(path.join(ROOT, 'dist', 'apps', 'gateway', 'main.js'))) {
    throw new Error('dist/apps is missing: run npm run build (or leave out --no-build)');
  }

  let brokers = (env.KAFKA_BROKERS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const kafka = require('./kafka');
  const stopping = { now: false };
  const apps = [];

  /** Stops every app, then lets go of the broker (stopped if this run started it). */
  const shutdown = async (code) => {
    if (stopping.now) return;
    stopping.now = true;
    // The gateway first (it stops taking requests), then the others at once: each app's own
    // shutdown (consumers leaving their groups, stores closing) takes seconds.
    const order = [...apps.filter((a) => a.name === 'gateway'), ...apps.filter((a) => a.name !== 'gateway')];
    for (const a of order) a.stop('SIGTERM');
    const all = Promise.all(order.map((a) => a.exited()));
    const timedOut = await Promise.race([all.then(() => false), sleep(STOP_GRACE_MS).then(() => true)]);
    if (timedOut) {
      for (const a of order) {
        if (!a.running()) continue;
        fail(`${a.instance} did not stop within ${STOP_GRACE_MS / 1000} s; killed`);
        a.stop('SIGKILL');
      }
    }
    await all;
    await releaseKafka();
    say('stopped');
    process.exit(code);
  };
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => void shutdown(0));

  if (brokers.length === 0) {
    say('starting the local Kafka broker (scripts/kafka.js)');
    const r = await kafka.acquire(process.pid);
    kafkaHeld = true;
    brokers = r.brokers.split(',');
  }
  const dbUrl = databaseUrl(env);
  const redisUrl = env.REDIS_URL || 'redis://127.0.0.1:6379';
  const dataDir = path.resolve(ROOT, env.SVC_DATA_DIR || path.join('data', 'distributed'));
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });

  await ensureDatabase(dbUrl);
  await ensureSchema(dbUrl, env.EVENT_STORE_SCHEMA);
  await ensureRedis(redisUrl);
  await brokerFree(brokers);
  const topics = await ensureTopics(brokers);
  say(
    `kafka ${brokers.join(',')} (${topics.created} topics created, ${topics.existing} there already); postgres database ${new URL(dbUrl).pathname.slice(1)}; redis prefix ${env.REDIS_KEY_PREFIX || 'svc'}; data dir ${dataDir}`,
  );

  const gatewayHost = env.HOST || '127.0.0.1';
  const gatewayPort = publicPort === 0 ? await freePort() : publicPort;
  const publicBase = `http://${gatewayHost === '0.0.0.0' || gatewayHost === '::' ? '127.0.0.1' : gatewayHost.includes(':') ? `[${gatewayHost}]` : gatewayHost}:${gatewayPort}/api`;
  const common = {
    ...env,
    EVENT_STORE: env.EVENT_STORE || 'postgres',
    DATABASE_URL: dbUrl,
    BUS: 'kafka',
    KAFKA_BROKERS: brokers.join(','),
    READ_STORE: 'redis',
    REDIS_URL: redisUrl,
    SVC_DATA_DIR: dataDir,
    // The links in patient emails lead to the public address, never to an app's internal port.
    WIDGET_BASE_URL: env.WIDGET_BASE_URL || publicBase,
  };
  const instanceId = (name, i) => (options.replicas[name] === 1 ? name : `${name}-${i}`);
  for (const name of INTERNAL_APPS) {
    for (let i = 1; i <= options.replicas[name]; i++) {
      const port = await freePort();
      // Internal: loopback only, reached through the gateway, whose X-Forwarded-For it trusts.
      apps.push(
        new App(name, instanceId(name, i), port, { ...common, HOST: '127.0.0.1', SVC_TRUST_PROXY: 'loopback', SVC_INTERNAL_URL: `http://127.0.0.1:${port}` }),
      );
    }
  }
  const gateways = [];
  for (let i = 1; i <= options.replicas.gateway; i++) {
    gateways.push(new App('gateway', instanceId('gateway', i), i === 1 ? gatewayPort : await freePort(), { ...common, HOST: gatewayHost }));
  }
  const urlOf = (a) => (a.name === 'gateway' ? publicBase.replace(`:${gatewayPort}/`, `:${a.port}/`) : `http://127.0.0.1:${a.port}/api`);

  // Every process as it runs now, for tools and fault tests (rewritten whole, then renamed into place).
  const stateFile = path.join(dataDir, 'distributed-state.json');
  const writeState = () => {
    const state = {
      pid: process.pid,
      publicBase,
      instances: apps.map((a) => ({ app: a.name, instance: a.instance, pid: a.pid ?? null, port: a.port, url: urlOf(a), state: a.state })),
    };
    try {
      fs.writeFileSync(`${stateFile}.tmp`, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
      fs.renameSync(`${stateFile}.tmp`, stateFile);
    } catch (err) {
      fail(`state file not written: ${err.message}`);
    }
  };
  const markReady = (a) => {
    a.state = 'ready';
    writeState();
  };

  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (const a of apps) a.start();
  writeState();
  try {
    await Promise.all(apps.map((a) => a.waitReady(deadline).then(() => markReady(a))));
    // Last: the others have announced their routes when it reads the route table.
    for (const g of gateways) {
      apps.push(g);
      g.start();
    }
    writeState();
    await Promise.all(gateways.map((g) => g.waitReady(deadline).then(() => markReady(g))));
  } catch (err) {
    fail(err.message);
    await shutdown(1);
    return;
  }
  for (const a of apps) say(`${a.instance.padEnd(20)} pid ${a.pid}  port ${a.port}  ${a.name === 'gateway' ? urlOf(a) : `${urlOf(a)} (internal)`}`);
  say(`every app is ready (${apps.length} processes; state in ${stateFile})`);
  process.stdout.write(`Patient-care integration service (distributed) listening at ${publicBase}\n`);

  // Supervision: a process that exits is started again on its port (each replica on its own).
  for (const a of apps) watch(a);
  function watch(a) {
    a.child.once('exit', async (code, signal) => {
      if (stopping.now) return;
      a.state = 'exited';
      writeState();
      const quick = Date.now() - a.startedAt < QUICK_EXIT_MS;
      a.quickExits = quick ? a.quickExits + 1 : 0;
      if (a.quickExits >= QUICK_EXITS_ALLOWED) {
        fail(`${a.instance} exited ${a.quickExits} times in a row within ${QUICK_EXIT_MS / 1000} s of its start; stopping:\n${a.tail.join('\n')}`);
        await shutdown(1);
        return;
      }
      say(`${a.instance} exited (${signal ?? `code ${code}`}); starting it again`);
      await sleep(quick ? 1000 * a.quickExits : 250);
      if (stopping.now) return;
      a.state = 'starting';
      a.start();
      writeState();
      watch(a);
      try {
        await a.waitReady(Date.now() + READY_TIMEOUT_MS);
        markReady(a);
        say(`${a.instance.padEnd(20)} pid ${a.pid}  ready again on port ${a.port}`);
      } catch (err) {
        if (!stopping.now && a.running()) fail(err.message);
      }
    });
  }
}

/** Set while this run holds the local broker (scripts/kafka.js acquire). */
let kafkaHeld = false;

/** Lets go of the local broker: stopped if this run started it and nobody else holds it. */
async function releaseKafka() {
  if (!kafkaHeld) return;
  kafkaHeld = false;
  await require('./kafka')
    .release(process.pid)
    .catch((err) => fail(`kafka broker not released: ${err.message}`));
}

main().catch(async (err) => {
  fail(`failed: ${err.message}`);
  // Whatever was started goes with this process (exit-with-parent.js).
  await releaseKafka();
  process.exit(1);
});
