#!/usr/bin/env node
/**
 * Starts the local servers the test suites use when they are down: PostgreSQL (127.0.0.1:5432,
 * the machine's cluster through pg_ctlcluster) and Redis (127.0.0.1:6379, no persistence). A
 * server that answers is left alone; one that cannot be started is reported, and the suites that
 * need it fail. Used by scripts/test.js (so by `npm test` and CI); the Kafka broker has its own
 * script (scripts/kafka.js).
 *   node scripts/services.js
 */
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');

function answers(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

async function waitFor(port, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await answers(port)) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

function has(command) {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

const SERVICES = [
  {
    name: 'PostgreSQL',
    port: 5432,
    command: 'pg_ctlcluster',
    start() {
      const versions = fs.existsSync('/etc/postgresql') ? fs.readdirSync('/etc/postgresql').sort((a, b) => Number(b) - Number(a)) : [];
      if (!versions.length) return 'no cluster in /etc/postgresql';
      const r = spawnSync('pg_ctlcluster', ['--skip-systemctl-redirect', versions[0], 'main', 'start'], { encoding: 'utf8', timeout: 60_000 });
      return r.status === 0 ? null : (r.stderr || r.stdout || `exit ${r.status}`).trim();
    },
  },
  {
    name: 'Redis',
    port: 6379,
    command: 'redis-server',
    start() {
      for (const dir of ['/var/lib/redis', '/var/log/redis']) fs.mkdirSync(dir, { recursive: true });
      const common = ['--daemonize', 'yes', '--port', '6379', '--save', '', '--appendonly', 'no'];
      let r = spawnSync('redis-server', [...common, '--bind', '127.0.0.1', '-::1', '--dir', '/var/lib/redis', '--logfile', '/var/log/redis/ci.log'], {
        encoding: 'utf8',
        timeout: 30_000,
      });
      // Without IPv6 the first form fails; the second binds the default addresses.
      if (r.status !== 0) r = spawnSync('redis-server', common, { encoding: 'utf8', timeout: 30_000 });
      return r.status === 0 ? null : (r.stderr || r.stdout || `exit ${r.status}`).trim();
    },
  },
];

async function main() {
  let ok = true;
  for (const s of SERVICES) {
    if (await answers(s.port)) continue;
    if (!has(s.command)) {
      console.log(`services: ${s.name} is not answering on 127.0.0.1:${s.port} and ${s.command} is not installed`);
      ok = false;
      continue;
    }
    let problem = null;
    try {
      problem = s.start();
    } catch (e) {
      problem = e.message;
    }
    if (!problem && (await waitFor(s.port, 20_000))) {
      console.log(`services: started ${s.name} on 127.0.0.1:${s.port}`);
    } else {
      console.log(`services: ${s.name} could not be started${problem ? `: ${problem}` : ` (127.0.0.1:${s.port} does not answer)`}`);
      ok = false;
    }
  }
  process.exit(ok ? 0 : 1);
}

main();
