#!/usr/bin/env node
// Over 400 lines: one command that fetches, configures, starts and stops the Kafka broker or cluster.
/**
 * The Apache Kafka broker for tests and development, run from its Maven Central jars with the
 * JDK (no Docker):
 *
 *   npm run kafka:up                      one combined broker/controller on 127.0.0.1:19092
 *   npm run kafka:up -- --brokers 3       three combined nodes (controller quorum of three) on
 *                                         127.0.0.1:19192-19194, for fault tests
 *   npm run kafka:down [-- --brokers 3]   stops the broker(s) this script started (pid files);
 *                                         without --brokers, every form that runs
 *   node scripts/kafka.js status
 *   node scripts/kafka.js acquire|release --holder PID   (scripts/test.js; see below)
 *
 * `up` fetches the jars if missing (deploy/kafka/pom.xml, into .kafka/lib), formats KRaft storage
 * once, starts the node(s) in the background, waits until a kafkajs admin call sees every node,
 * and prints `KAFKA_BROKERS=<list>` on its last line. A node that already runs (live pid file,
 * same config) is reused; a missing node of a cluster is started again. Options: `--port N`
 * (first client port; `KAFKA_PORT`), `--fresh` (wipe the form's data first; only when it is
 * down). Logs and data live in .kafka/<form>/ (git-ignored; `KAFKA_STATE_DIR` moves it, and
 * `KAFKA_LIB_DIR` names where the jars are, default <state dir>/lib: a fault test runs a broker of
 * its own with its own state dir and ports and the jars of the checkout, libs/testing faults.ts).
 *
 * Used by scripts/test.js through `acquire`/`release`: a broker started for a test run is stopped
 * when the last run using it ends; one started by `kafka:up` is left running.
 */
const { spawn, spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const STATE = path.resolve(process.env.KAFKA_STATE_DIR || path.join(ROOT, '.kafka'));
const LIB = path.resolve(process.env.KAFKA_LIB_DIR || path.join(STATE, 'lib'));
const POM = path.join(ROOT, 'deploy', 'kafka', 'pom.xml');
const HEAP = process.env.KAFKA_HEAP || '512m';
const READY_TIMEOUT_MS = 120_000;

const log = (msg) => process.stderr.write(`kafka: ${msg}\n`);

/**
 * The nodes of a form: client ports first, then controller ports. The first port is the one
 * asked for (`--port`, `KAFKA_PORT`); else, while the form runs, the one it runs on; else the
 * default (19092 for one node, 19192 for three).
 */
function layout(count, basePort) {
  const name = count === 1 ? 'single' : `cluster-${count}`;
  const dir = path.join(STATE, name);
  const nodesFrom = (base) =>
    Array.from({ length: count }, (_, i) => {
      const nodeDir = path.join(dir, `node-${i + 1}`);
      return {
        id: i + 1,
        port: base + i,
        controllerPort: base + count + i,
        dir: nodeDir,
        dataDir: path.join(nodeDir, 'data'),
        config: path.join(nodeDir, 'server.properties'),
        pidFile: path.join(nodeDir, 'kafka.pid'),
        stdout: path.join(nodeDir, 'stdout.log'),
        serverLog: path.join(nodeDir, 'server.log'),
      };
    });
  const asked = basePort ?? (Number(process.env.KAFKA_PORT) || undefined);
  const fallback = count === 1 ? 19092 : 19192;
  // Pid files and configs do not depend on the port: whether the form runs is known before it.
  const running = nodesFrom(fallback).some((n) => nodePid(n) !== null);
  const portFile = path.join(dir, 'base-port');
  const recorded = running && fs.existsSync(portFile) ? Number(fs.readFileSync(portFile, 'utf8')) || undefined : undefined;
  const base = asked ?? recorded ?? fallback;
  const nodes = nodesFrom(base);
  return { name, count, dir, nodes, base, recorded, brokers: nodes.map((n) => `127.0.0.1:${n.port}`).join(',') };
}

function serverProperties(form, node) {
  const n = form.count;
  const voters = form.nodes.map((x) => `${x.id}@127.0.0.1:${x.controllerPort}`).join(',');
  return [
    '# Written by scripts/kafka.js on every start; edit the script, not this file.',
    'process.roles=broker,controller',
    `node.id=${node.id}`,
    `controller.quorum.voters=${voters}`,
    `listeners=PLAINTEXT://127.0.0.1:${node.port},CONTROLLER://127.0.0.1:${node.controllerPort}`,
    `advertised.listeners=PLAINTEXT://127.0.0.1:${node.port}`,
    'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
    'controller.listener.names=CONTROLLER',
    'inter.broker.listener.name=PLAINTEXT',
    `log.dirs=${node.dataDir}`,
    // As docker-compose.yml: request/reply topics of new patterns are created on first use.
    'auto.create.topics.enable=true',
    'num.partitions=6',
    `default.replication.factor=${n}`,
    `min.insync.replicas=${n === 1 ? 1 : 2}`,
    `offsets.topic.replication.factor=${n}`,
    'offsets.topic.num.partitions=6',
    `transaction.state.log.replication.factor=${n}`,
    `transaction.state.log.min.isr=${n === 1 ? 1 : 2}`,
    `share.coordinator.state.topic.replication.factor=${n}`,
    `share.coordinator.state.topic.min.isr=${n === 1 ? 1 : 2}`,
    'group.initial.rebalance.delay.ms=0',
    'log.retention.hours=24',
    'log.segment.bytes=67108864',
    'num.network.threads=2',
    'num.io.threads=4',
    'num.recovery.threads.per.data.dir=1',
    '',
  ].join('\n');
}

const LOG4J2 = `<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by scripts/kafka.js: each node logs to server.log in its own folder, never the console. -->
<Configuration status="WARN">
  <Appenders>
    <RollingFile name="file" fileName="\${sys:kafka.logs.dir}/server.log" filePattern="\${sys:kafka.logs.dir}/server.log.%i">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
      <Policies><SizeBasedTriggeringPolicy size="10 MB"/></Policies>
      <DefaultRolloverStrategy max="3"/>
    </RollingFile>
  </Appenders>
  <Loggers>
    <Logger name="kafka.request.logger" level="warn"/>
    <Logger name="org.apache.kafka.controller" level="info"/>
    <Root level="info"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
`;

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

function pidAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

function readPid(file) {
  try {
    const pid = Number(fs.readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** The node's recorded pid, if that process is alive and is this node's broker (not a reused pid). */
function nodePid(node) {
  const pid = readPid(node.pidFile);
  if (pid === null || !pidAlive(pid)) return null;
  try {
    const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (!cmd.includes('kafka.Kafka') || !cmd.includes(node.config)) return null;
  } catch {
    // No /proc: trust the live pid.
  }
  return pid;
}

// ───────────────────────────── jars ─────────────────────────────

function javaBin() {
  return process.env.JAVA_HOME ? path.join(process.env.JAVA_HOME, 'bin', 'java') : 'java';
}

function checkJava() {
  const r = spawnSync(javaBin(), ['-version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) throw new Error('no Java found (Kafka 4 needs Java 17 or later; set JAVA_HOME or put java on PATH)');
  const m = /version "(\d+)/.exec(r.stderr || '');
  if (m && Number(m[1]) < 17) throw new Error(`Java ${m[1]} found; Kafka 4 needs Java 17 or later`);
}

/** Copies the broker's jars into .kafka/lib unless they are there for the current pom. */
function ensureJars() {
  const stamp = crypto.createHash('sha256').update(fs.readFileSync(POM)).digest('hex');
  const marker = path.join(LIB, '.pom-sha256');
  if (fs.existsSync(marker) && fs.readFileSync(marker, 'utf8').trim() === stamp) return;
  log('fetching the broker jars (deploy/kafka/pom.xml; the first run downloads into ~/.m2)');
  fs.rmSync(LIB, { recursive: true, force: true }); // a changed pom: no two versions on the classpath
  const r = spawnSync('mvn', ['-B', '-q', '-Dstyle.color=never', '-f', POM, 'package', `-Dkafka.lib=${LIB}`], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 10 * 60_000,
  });
  if (r.error || r.status !== 0) {
    const out = `${r.stdout || ''}${r.stderr || ''}`.trim().split('\n').slice(-20).join('\n');
    throw new Error(`mvn could not fetch the Kafka jars${r.error ? ` (${r.error.message})` : ''}\n${out}`);
  }
  fs.writeFileSync(marker, `${stamp}\n`);
}

function jvmArgs(node) {
  return [
    `-Xmx${HEAP}`,
    '-Xms128m',
    '-XX:+UseG1GC',
    '-XX:MaxGCPauseMillis=20',
    '-XX:InitiatingHeapOccupancyPercent=35',
    '-Djava.awt.headless=true',
    `-Dkafka.logs.dir=${node.dir}`,
    `-Dlog4j2.configurationFile=${path.join(STATE, 'log4j2.xml')}`,
    '-cp',
    path.join(LIB, '*'),
  ];
}

// ───────────────────────────── start / stop ─────────────────────────────

function portFree(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

function clusterId(form) {
  const file = path.join(form.dir, 'cluster-id');
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  // A Kafka Uuid: 16 random bytes, base64url without padding; never one that starts with "-"
  // (kafka-storage's argument parser would read it as an option, as Kafka's own Uuid avoids too).
  let id;
  do id = crypto.randomBytes(16).toString('base64url');
  while (id.startsWith('-'));
  fs.mkdirSync(form.dir, { recursive: true });
  fs.writeFileSync(file, `${id}\n`);
  return id;
}

function format(form, node) {
  if (fs.existsSync(path.join(node.dataDir, 'meta.properties'))) return;
  const r = spawnSync(javaBin(), [...jvmArgs(node), 'kafka.tools.StorageTool', 'format', '-t', clusterId(form), '-c', node.config, '--ignore-formatted'], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (r.error || r.status !== 0) {
    throw new Error(
      `formatting KRaft storage of node ${node.id} failed: ${(r.stderr || r.stdout || r.error?.message || '').trim().split('\n').slice(-10).join('\n')}`,
    );
  }
}

async function startNode(form, node) {
  fs.mkdirSync(node.dir, { recursive: true });
  for (const port of [node.port, node.controllerPort]) {
    if (!(await portFree(port))) {
      throw new Error(`port ${port} on 127.0.0.1 is taken by another process (choose another first port with --port or KAFKA_PORT)`);
    }
  }
  fs.writeFileSync(node.config, serverProperties(form, node));
  format(form, node);
  const out = fs.openSync(node.stdout, 'a');
  const child = spawn(javaBin(), [...jvmArgs(node), 'kafka.Kafka', node.config], {
    detached: true,
    stdio: ['ignore', out, out],
    cwd: node.dir,
  });
  fs.closeSync(out);
  child.unref();
  fs.writeFileSync(node.pidFile, `${child.pid}\n`);
  log(`node ${node.id} started (pid ${child.pid}, 127.0.0.1:${node.port}, log ${path.relative(ROOT, node.serverLog)})`);
}

function tail(file, lines = 15) {
  try {
    return fs.readFileSync(file, 'utf8').trim().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Resolves once a kafkajs admin client sees every node of the form as a broker. */
async function waitReady(form, timeoutMs = READY_TIMEOUT_MS) {
  const { Kafka, logLevel } = require('kafkajs');
  const deadline = Date.now() + timeoutMs;
  let last = null;
  for (;;) {
    for (const node of form.nodes) {
      if (nodePid(node) === null) {
        throw new Error(
          `node ${node.id} exited while starting; end of ${path.relative(ROOT, node.stdout)} and server.log:\n${tail(node.stdout, 5)}\n${tail(node.serverLog)}`,
        );
      }
    }
    const admin = new Kafka({
      clientId: 'kafka-up',
      brokers: form.brokers.split(','),
      logLevel: logLevel.NOTHING,
      connectionTimeout: 2000,
      requestTimeout: 5000,
      retry: { retries: 0 },
    }).admin();
    try {
      await admin.connect();
      const cluster = await admin.describeCluster();
      await admin.listTopics();
      if (cluster.brokers.length >= form.count) return;
      last = new Error(`${cluster.brokers.length} of ${form.count} brokers registered`);
    } catch (e) {
      last = e;
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
    if (Date.now() > deadline)
      throw new Error(
        `the broker did not answer within ${timeoutMs / 1000} s (${last?.message ?? last}); see ${path.relative(ROOT, form.dir)}/node-*/server.log`,
      );
    await sleep(500);
  }
}

async function stopForm(form) {
  const running = form.nodes.map((node) => ({ node, pid: nodePid(node) })).filter((x) => x.pid !== null);
  for (const { pid } of running) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  const deadline = Date.now() + 30_000;
  while (running.some(({ pid }) => pidAlive(pid)) && Date.now() < deadline) await sleep(200);
  for (const { node, pid } of running) {
    if (pidAlive(pid)) {
      log(`node ${node.id} (pid ${pid}) did not stop within 30 s: killing it`);
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  for (const node of form.nodes) fs.rmSync(node.pidFile, { force: true });
  fs.rmSync(path.join(form.dir, 'auto-stop'), { force: true });
  fs.rmSync(path.join(form.dir, 'holders'), { recursive: true, force: true });
  if (running.length) log(`stopped ${form.name} (${running.map((x) => `pid ${x.pid}`).join(', ')})`);
  return running.length;
}

// ───────────────────────────── one at a time ─────────────────────────────

/** A lock file per form, so two callers at once do not both start it. */
async function withLock(form, fn) {
  fs.mkdirSync(form.dir, { recursive: true });
  const lock = path.join(form.dir, 'lock');
  const deadline = Date.now() + 5 * 60_000;
  for (;;) {
    try {
      fs.writeFileSync(lock, `${process.pid}\n`, { flag: 'wx' });
      break;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
      const holder = readPid(lock);
      // An empty lock may be one being written this instant: stale only once it is a few seconds old.
      let age = 0;
      try {
        age = Date.now() - fs.statSync(lock).mtimeMs;
      } catch {
        continue; // gone meanwhile
      }
      if ((holder === null && age > 3000) || (holder !== null && !pidAlive(holder))) {
        fs.rmSync(lock, { force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`${lock} is held by pid ${holder}`);
      await sleep(250);
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(lock, { force: true });
  }
}

// ───────────────────────────── the commands ─────────────────────────────

/**
 * Starts the form (or reuses what runs) and resolves when it answers:
 * `{ brokers, started }` where `started` tells whether this call started any node.
 */
/**
 * A form that is not running, on its default ports, where another process (another checkout's
 * broker, say) holds one of them: the first run of free ports after them, so that a test run is
 * not stopped by a stranger. Ports asked for (`--port`, `KAFKA_PORT`) are never moved.
 */
async function onFreePorts(form, count, asked) {
  if (asked !== undefined || process.env.KAFKA_PORT) return form;
  const free = async (f) => {
    for (const n of f.nodes) if (!(await portFree(n.port)) || !(await portFree(n.controllerPort))) return false;
    return true;
  };
  if (await free(form)) return form;
  for (let step = 1; step <= 40; step++) {
    const moved = layout(count, form.base + step * 10);
    if (await free(moved)) {
      log(`ports ${form.base}+ on 127.0.0.1 are taken by another process: using ${moved.base}+`);
      return moved;
    }
  }
  return form;
}

async function up({ count = 1, port, fresh = false, holder } = {}) {
  let form = layout(count, port);
  return withLock(form, async () => {
    if (form.nodes.every((n) => nodePid(n) === null)) form = await onFreePorts(form, count, port);
    const down = form.nodes.filter((n) => nodePid(n) === null);
    if (down.length < form.nodes.length && form.recorded && form.base !== form.recorded) {
      throw new Error(`${form.name} runs on 127.0.0.1:${form.recorded}, not ${form.base}; stop it first to move it (npm run kafka:down)`);
    }
    if (fresh) {
      if (down.length !== form.nodes.length) throw new Error(`--fresh: ${form.name} is running; stop it first (npm run kafka:down)`);
      for (const node of form.nodes) fs.rmSync(node.dir, { recursive: true, force: true });
      fs.rmSync(path.join(form.dir, 'cluster-id'), { force: true });
    }
    if (down.length) {
      if (down.length === form.nodes.length) fs.writeFileSync(path.join(form.dir, 'base-port'), `${form.base}\n`);
      checkJava();
      ensureJars();
      fs.writeFileSync(path.join(STATE, 'log4j2.xml'), LOG4J2);
      for (const node of down) await startNode(form, node);
    } else {
      log(`reusing the running ${form.name} broker (pids ${form.nodes.map((n) => nodePid(n)).join(', ')})`);
    }
    try {
      await waitReady(form);
    } catch (e) {
      if (down.length === form.nodes.length) await stopForm(form); // nothing half-started left behind
      throw e;
    }
    if (holder !== undefined) {
      // Registered under the lock, so a release running meanwhile cannot stop it under us.
      fs.mkdirSync(path.join(form.dir, 'holders'), { recursive: true });
      fs.writeFileSync(path.join(form.dir, 'holders', String(holder)), '');
      if (down.length > 0) fs.writeFileSync(path.join(form.dir, 'auto-stop'), '');
    }
    return { brokers: form.brokers, started: down.length > 0, form };
  });
}

const FORMS = () =>
  fs.existsSync(STATE)
    ? fs
        .readdirSync(STATE)
        .map((d) => (d === 'single' ? 1 : /^cluster-(\d+)$/.exec(d)?.[1]))
        .filter(Boolean)
        .map(Number)
    : [];

/** Stops the given form, or every form that has pid files. */
async function down({ count, port } = {}) {
  const counts = count ? [count] : FORMS();
  let stopped = 0;
  for (const c of counts) {
    const form = layout(c, port);
    stopped += await withLock(form, () => stopForm(form));
  }
  if (!stopped) log('no broker of this script was running');
}

// A test run holds the broker while it runs (scripts/test.js); the last holder out stops a broker
// that a test run started, never one started by `kafka:up`.

async function acquire(holder = process.pid, options = {}) {
  return up({ ...options, holder });
}

async function release(holder = process.pid, { count = 1, port } = {}) {
  const form = layout(count, port);
  await withLock(form, async () => {
    const holders = path.join(form.dir, 'holders');
    fs.rmSync(path.join(holders, String(holder)), { force: true });
    const others = fs.existsSync(holders) ? fs.readdirSync(holders).filter((h) => pidAlive(Number(h))) : [];
    if (others.length || !fs.existsSync(path.join(form.dir, 'auto-stop'))) return;
    await stopForm(form);
  });
}

function status() {
  const counts = FORMS();
  if (!counts.length) console.log('no broker state in', STATE);
  for (const c of counts) {
    const form = layout(c);
    for (const node of form.nodes) {
      const pid = nodePid(node);
      console.log(`${form.name} node ${node.id} 127.0.0.1:${node.port}: ${pid ? `running (pid ${pid})` : 'stopped'}`);
    }
  }
}

function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : argv[++i];
      if (!/^\d+$/.test(v ?? '')) throw new Error(`${a.split('=')[0]} takes a number`);
      return Number(v);
    };
    if (a === '--brokers' || a.startsWith('--brokers=')) opts.count = value();
    else if (a === '--port' || a.startsWith('--port=')) opts.port = value();
    else if (a === '--fresh') opts.fresh = true;
    else if (a === '--holder' || a.startsWith('--holder=')) opts.holder = value();
    else throw new Error(`unknown option ${a}`);
  }
  if (opts.count !== undefined && opts.count !== 1 && opts.count !== 3) throw new Error('--brokers is 1 or 3');
  return opts;
}

async function main() {
  const [cmd, ...rest] = process.argv.slice(2);
  const opts = parseArgs(rest);
  if (cmd === 'up') {
    const { brokers, form } = await up(opts);
    // Asked for by hand: it stays up after test runs that use it, until kafka:down.
    fs.rmSync(path.join(form.dir, 'auto-stop'), { force: true });
    console.log(`KAFKA_BROKERS=${brokers}`);
  } else if (cmd === 'down') {
    await down(opts);
  } else if (cmd === 'acquire') {
    // For scripts/test.js: the broker for one test run, held by the pid given (default: the caller).
    const { brokers } = await acquire(opts.holder ?? process.ppid, opts);
    console.log(`KAFKA_BROKERS=${brokers}`);
  } else if (cmd === 'release') {
    await release(opts.holder ?? process.ppid, opts);
  } else if (cmd === 'status') {
    status();
  } else {
    throw new Error('usage: node scripts/kafka.js up|down|status|acquire|release [--brokers 1|3] [--port N] [--fresh] [--holder PID]');
  }
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (e) => {
      log(e.message);
      process.exit(1);
    },
  );
}

module.exports = { up, down, acquire, release, layout, STATE };
