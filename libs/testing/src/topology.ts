import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Api, freePort, tempDataDir } from './index';

/**
 * Distributed mode as `npm run start:distributed` runs it (scripts/start-distributed.js): six
 * processes on Kafka, PostgreSQL and Redis, the gateway on a free port. Each topology gets a
 * database, a Redis key prefix and a data dir of its own; Kafka is the broker of KAFKA_BROKERS
 * (the test command starts one), else the script's local broker.
 */
export class DistributedTopology {
  private child: ChildProcess | undefined;
  output = '';
  baseUrl!: string;
  api!: Api;
  /**
   * The processes by instance id, as the command printed them (updated when it restarts one):
   * the app's name for an app that runs once, `<app>-<n>` for each replica of one that runs several
   * (SVC_REPLICAS).
   */
  readonly pids = new Map<string, number>();
  readonly dbName = `svc_topo_${randomBytes(5).toString('hex')}`;
  readonly redisKeyPrefix = `topo-${randomBytes(5).toString('hex')}`;
  private exited: Promise<number | null> | undefined;
  private logHandedOver = false;

  constructor(
    readonly env: Record<string, string> = {},
    readonly dataDir: string = tempDataDir('svc-topology-'),
  ) {}

  async start(timeoutMs = 200_000): Promise<this> {
    const port = await freePort();
    const script = resolve(__dirname, '../../../scripts/start-distributed.js');
    // The test command has built dist already (a build here, beside suites running from dist, could
    // replace files under them).
    const child = spawn(process.execPath, [script, '--no-build'], {
      env: {
        ...process.env,
        NODE_ENV: 'test',
        PORT: String(port),
        HOST: '127.0.0.1',
        SVC_DEV_TOOLS: '1',
        SVC_DB_NAME: this.dbName,
        REDIS_KEY_PREFIX: this.redisKeyPrefix,
        SVC_DATA_DIR: this.dataDir,
        SVC_START_TIMEOUT_MS: String(timeoutMs),
        ...this.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.exited = new Promise((r) => child.once('exit', (code) => r(code)));
    // Only the lines not looked at yet are searched for pids (a long run's output is large).
    let scanned = 0;
    const onOutput = (d: Buffer) => {
      this.output += d.toString();
      const end = this.output.lastIndexOf('\n') + 1;
      if (end <= scanned) return;
      for (const m of this.output.slice(scanned, end).matchAll(/^distributed: (\S+)\s+pid (\d+)/gm)) this.pids.set(m[1], Number(m[2]));
      scanned = end;
    };
    child.stdout!.on('data', onOutput);
    child.stderr!.on('data', onOutput);
    const url = (await this.waitFor(/^Patient-care integration service \(distributed\) listening at (http:\/\/\S+)/m, timeoutMs))[1];
    this.baseUrl = url;
    this.api = new Api(url);
    return this;
  }

  /** Resolves with the first match of `re` in the command's output (now or later). */
  async waitFor(re: RegExp, timeoutMs: number, from = 0): Promise<RegExpMatchArray> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const m = this.output.slice(from).match(re);
      if (m) return m;
      const child = this.child;
      if (child && (child.exitCode !== null || child.signalCode !== null))
        throw new Error(`start-distributed exited (${child.exitCode ?? child.signalCode}) before ${re}:\n${this.output.slice(-4000)}`);
      if (Date.now() > until) throw new Error(`no ${re} within ${timeoutMs} ms:\n${this.output.slice(-4000)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The command's state file (`<data dir>/distributed-state.json`): every process as it runs now. */
  instances(): { app: string; instance: string; pid: number | null; port: number; url: string; state: 'starting' | 'ready' | 'exited' }[] {
    return JSON.parse(readFileSync(join(this.dataDir, 'distributed-state.json'), 'utf8')).instances;
  }

  /** SIGKILL to one process by its pid (the command starts it again): an app's name, or a replica's instance id. */
  kill9(app: string): number {
    const pid = this.pids.get(app);
    if (!pid) throw new Error(`no pid for ${app}`);
    process.kill(pid, 'SIGKILL');
    return pid;
  }

  /** SIGTERM to the command; resolves with its exit code (SIGKILL after `timeoutMs`). */
  async stop(timeoutMs = 40_000): Promise<number | null> {
    const child = this.child;
    if (!child || !this.exited) return null;
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
      this.handOverLog();
    }
  }

  /**
   * A topology whose env sets `SVC_LOG_FILE: ''` logs to its output (a suite that reads the apps'
   * request lines, `output`); once stopped, its JSON lines go to the test run's log file, so that
   * the run's log check (no PHI, no secret) reads them like every other service line.
   */
  private handOverLog(): void {
    const file = process.env.SVC_LOG_FILE;
    if (this.env.SVC_LOG_FILE !== '' || !file || this.logHandedOver) return;
    this.logHandedOver = true;
    const lines = this.output.split('\n').filter((l) => l.startsWith('{'));
    if (lines.length) appendFileSync(file, `${lines.join('\n')}\n`);
  }

  /**
   * After stop(): drops what this topology kept (its database, its Redis keys, its data dir), so
   * test runs do not pile databases up on the local server.
   */
  async cleanup(): Promise<void> {
    const { Client } = await import('pg');
    const url = new URL(this.env.DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
    url.pathname = '/postgres';
    const pg = new Client({ connectionString: url.toString() });
    await pg.connect();
    try {
      await pg.query(`DROP DATABASE IF EXISTS "${this.dbName}" WITH (FORCE)`);
    } finally {
      await pg.end();
    }
    const { default: Redis } = await import('ioredis');
    const redis = new Redis(this.env.REDIS_URL ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    try {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${this.redisKeyPrefix}:*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length) await redis.del(...keys);
      } while (cursor !== '0');
    } finally {
      redis.disconnect();
    }
    rmSync(this.dataDir, { recursive: true, force: true });
  }

  async staffToken(sub: string): Promise<string> {
    const r = await this.api.post('/dev/staff-tokens', { sub, email: `${sub}@example.test` });
    if (r.status !== 201) throw new Error(`staff token: ${r.status} ${r.text}`);
    return r.body.idToken as string;
  }
}
