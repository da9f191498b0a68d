import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync } from 'node:fs';
import type { Server as HttpServer } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { OidcIssuer } from './oidc-issuer';

export { OidcIssuer } from './oidc-issuer';
export { TcpForwarder } from './tcp-forwarder';
export { DistributedTopology } from './topology';
export { TestEventSchema, fixedMetadata, testEvent } from './event-store-fixtures';
export { OwnKafka, OwnRedis, WebhookReceiver, appExits, eventually, faultSuite, freePortRun, keepOutput, subscribedTenant, topologyTenant } from './faults';
export type { WebhookArrival } from './faults';
export { CaseLoad, FaultRun } from './case-load';
export type { CaseLoadOptions } from './case-load';
export { describeInProcess, e2eTarget, inProcess, onTopology, topologyBaseUrl, topologyDatabaseUrl, topologyDataDir, topologyKafkaBrokers } from './e2e-target';
import { onTopology, topologyBaseUrl } from './e2e-target';

export function tempDataDir(prefix = 'svc-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => res(port));
    });
  });
}

export interface TestResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
  text: string;
}

/** A tiny HTTP client over real fetch. */
export class Api {
  constructor(readonly baseUrl: string) {}

  async request<T = any>(
    method: string,
    path: string,
    options: { token?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
  ): Promise<TestResponse<T>> {
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    let body: string | undefined;
    if (options.rawBody !== undefined) body = options.rawBody;
    else if (options.body !== undefined) body = JSON.stringify(options.body);
    if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
    const res = await fetch(`${this.baseUrl}${path}`, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, body: parsed as T, headers: res.headers, text };
  }

  get<T = any>(path: string, token?: string) {
    return this.request<T>('GET', path, { token });
  }
  post<T = any>(path: string, body?: unknown, token?: string) {
    return this.request<T>('POST', path, { body, token });
  }
  put<T = any>(path: string, body?: unknown, token?: string) {
    return this.request<T>('PUT', path, { body, token });
  }
  patch<T = any>(path: string, body?: unknown, token?: string) {
    return this.request<T>('PATCH', path, { body, token });
  }
  delete<T = any>(path: string, token?: string) {
    return this.request<T>('DELETE', path, { token });
  }
}

/** What `enrollPatient` needs of a tenant (as `TestApp.tenant()` returns it). */
export interface EnrolmentTenant {
  staff: string;
  env: string;
  apiKey: string;
}

export interface EnrolledPatient {
  patientId: string;
  email: string;
  externalPatientId: string;
}

/** programKey of the helper's protocol; named on every enrolment, so other active protocols do not matter. */
export const ENROLMENT_PROGRAM_KEY = 'test-enrolment';

/**
 * A minimal valid protocol (decisions 6), cadence 30 days: an enrolled patient gets no check-in
 * unless the clock moves a month.
 */
function enrolmentProtocolBody() {
  return {
    programKey: ENROLMENT_PROGRAM_KEY,
    name: 'Test enrolment',
    defaultCadenceDays: 30,
    questions: [{ key: 'pain', text: 'How bad is your pain today?', type: 'scale', min: 0, max: 10 }],
    redFlags: { emergencyTerms: true },
  };
}

/** The helper's protocol per environment path (`tenant.env`; environment ids are unique uuids). */
const enrolmentProtocols = new Map<string, Promise<string>>();

async function enrolmentProtocol(api: Api, tenant: EnrolmentTenant): Promise<string> {
  let p = enrolmentProtocols.get(tenant.env);
  if (!p) {
    p = (async () => {
      const created = await api.post(`${tenant.env}/protocols`, enrolmentProtocolBody(), tenant.staff);
      let id: string | undefined = created.body?.id;
      if (created.status === 409) {
        const list = await api.get(`${tenant.env}/protocols`, tenant.staff);
        id = (list.body?.protocols ?? []).find((x: { programKey: string }) => x.programKey === ENROLMENT_PROGRAM_KEY)?.id;
      } else if (created.status !== 201) throw new Error(`enrolment protocol: ${created.status} ${created.text}`);
      if (!id) throw new Error('enrolment protocol: not found');
      const a = await api.post(`${tenant.env}/protocols/${id}/activate`, undefined, tenant.staff);
      if (a.status !== 200) throw new Error(`enrolment protocol activate: ${a.status} ${a.text}`);
      return id;
    })();
    enrolmentProtocols.set(tenant.env, p);
    p.catch(() => enrolmentProtocols.delete(tenant.env));
  }
  return p;
}

/**
 * A patient enrolled in the tenant's environment: the helper's protocol is created and activated
 * once per environment, then `patient.created` is sent with the tenant's API key (so the BAA must
 * be signed). Email addresses end with `@example.test`.
 */
export async function enrollPatient(api: Api, tenant: EnrolmentTenant, options: { email?: string; externalPatientId?: string } = {}): Promise<EnrolledPatient> {
  const suffix = randomUUID();
  const email = options.email ?? `patient-${suffix}@example.test`;
  // Planted canaries: the whole-run log check (scripts/log-check.js) fails on any of them in a log line.
  const externalPatientId = options.externalPatientId ?? `canary-ext-${suffix}`;
  if (!email.endsWith('@example.test')) throw new Error('enrollPatient: email addresses must end with @example.test');
  await enrolmentProtocol(api, tenant);
  const r = await api.post(
    '/client/patient-events',
    {
      eventId: randomUUID(),
      type: 'patient.created',
      externalPatientId,
      email,
      firstName: 'Canary-First',
      lastName: 'Canary-Last',
      phone: '+1555000' + suffix.replace(/\D/g, '').slice(0, 4).padEnd(4, '0'),
      programKey: ENROLMENT_PROGRAM_KEY,
    },
    tenant.apiKey,
  );
  if (r.status !== 202) throw new Error(`enrol patient: ${r.status} ${r.text}`);
  return { patientId: r.body.patientId as string, email, externalPatientId };
}

/**
 * The standalone service started in-process on a free port (real HTTP), on a data dir of its
 * own. `restart()` closes it and starts it again on the same data dir.
 * With `SVC_E2E_TARGET=distributed` (e2e-target.ts) it is the run's shared topology instead, at
 * the gateway's base URL: `start()` and `stop()` start and stop nothing, and a TestApp with an
 * environment or issuer of its own, `restart()` and `httpServer()` throw.
 */
export class TestApp {
  private app: { close(): Promise<void>; getHttpServer(): HttpServer } | undefined;
  api!: Api;
  baseUrl!: string;

  constructor(
    readonly dataDir: string = tempDataDir(),
    readonly env: Record<string, string> = {},
    /** Staff tokens from this issuer (STAFF_OIDC_ISSUER) instead of the dev tools (production mode has none). */
    readonly oidc?: OidcIssuer,
  ) {}

  async start(): Promise<this> {
    if (onTopology()) {
      // The run's one topology (e2e-target.ts): nothing to start; a suite that needs a service
      // set up its own way is not one the topology can serve.
      if (Object.keys(this.env).length > 0 || this.oidc) {
        throw new Error(
          `this TestApp needs a service of its own (${this.oidc ? 'STAFF_OIDC_ISSUER' : Object.keys(this.env).join(', ')}): it cannot run against the shared topology (SVC_E2E_TARGET=distributed)`,
        );
      }
      this.baseUrl = topologyBaseUrl();
      this.api = new Api(this.baseUrl);
      return this;
    }
    // Imported lazily so that unit tests that only use the helpers do not load Nest. The one import
    // of an app by a lib (eslint.config.mjs allows it): starting the standalone stack is this lib's job.
    const { startStandalone } = await import('@apps/standalone');
    const { loadConfig } = await import('@svc/platform');
    const config = loadConfig({
      ...process.env,
      NODE_ENV: 'test',
      SVC_DATA_DIR: this.dataDir,
      PORT: '0',
      HOST: '127.0.0.1',
      ...(this.oidc ? { STAFF_OIDC_ISSUER: this.oidc.issuer } : {}),
      ...this.env,
    });
    const { app, baseUrl } = await startStandalone(config);
    this.app = app;
    this.baseUrl = baseUrl;
    this.api = new Api(baseUrl);
    return this;
  }

  async stop(): Promise<void> {
    await this.app?.close();
    this.app = undefined;
  }

  /** The started app's HTTP server (its bound address, its connection cap). */
  httpServer(): HttpServer {
    if (onTopology()) throw new Error('httpServer(): the shared topology is not in this process');
    if (!this.app) throw new Error('TestApp is not started');
    return this.app.getHttpServer();
  }

  async restart(): Promise<this> {
    if (onTopology()) throw new Error('restart(): the shared topology is not restarted by a suite');
    await this.stop();
    return this.start();
  }

  /** Staff ID token from the dev issuer. */
  async staffToken(claims: { sub: string; email?: string; permissions?: string[]; mfa?: boolean }): Promise<string> {
    if (this.oidc) return this.oidc.token(claims);
    const r = await this.api.post('/dev/staff-tokens', { email: `${claims.sub}@example.test`, ...claims });
    if (r.status !== 201) throw new Error(`staff token: ${r.status} ${r.text}`);
    return r.body.idToken as string;
  }

  async advanceClock(seconds: number): Promise<string> {
    const r = await this.api.post('/dev/clock', { advanceSeconds: seconds });
    if (r.status !== 201 && r.status !== 200) throw new Error(`clock: ${r.status} ${r.text}`);
    return r.body.now as string;
  }

  /** A patient enrolled in the tenant's sandbox (see `enrollPatient`): `{ patientId, email, externalPatientId }`. */
  enrolledPatient(tenant: EnrolmentTenant, options: { email?: string; externalPatientId?: string } = {}): Promise<EnrolledPatient> {
    return enrollPatient(this.api, tenant, options);
  }

  /**
   * An organization with a signed BAA (unless `baa: false`) and a sandbox API key.
   */
  async tenant(options: { baa?: boolean; ownerSub?: string } = {}) {
    const ownerSub = options.ownerSub ?? `owner-${Math.random().toString(36).slice(2)}`;
    const staff = await this.staffToken({ sub: ownerSub });
    const org = await this.api.post('/organizations', { name: 'Test Clinic' }, staff);
    if (org.status !== 201) throw new Error(`org: ${org.status} ${org.text}`);
    const sandbox = org.body.environments.find((e: { kind: string }) => e.kind === 'sandbox').id as string;
    const production = org.body.environments.find((e: { kind: string }) => e.kind === 'production').id as string;
    const key = await this.api.post(`/organizations/${org.body.id}/environments/${sandbox}/api-keys`, { name: 'test' }, staff);
    if (key.status !== 201) throw new Error(`key: ${key.status} ${key.text}`);
    if (options.baa !== false) {
      const baa = await this.api.post(`/organizations/${org.body.id}/baa`, { signerName: 'Ada Owner', signerTitle: 'CEO' }, staff);
      if (baa.status !== 201) throw new Error(`baa: ${baa.status} ${baa.text}`);
    }
    return {
      staff,
      ownerSub,
      orgId: org.body.id as string,
      sandbox,
      production,
      apiKey: key.body.key as string,
      env: `/organizations/${org.body.id}/environments/${sandbox}`,
    };
  }
}

/** A built app process (dist; the standalone root by default), for kill -9 tests. */
export class StandaloneProcess {
  private child: ChildProcess | undefined;
  api!: Api;
  baseUrl!: string;
  output = '';

  constructor(
    readonly dataDir: string = tempDataDir(),
    readonly env: Record<string, string> = {},
    /** Which built app to run: the standalone root, or one app of distributed mode. */
    readonly app: string = 'standalone',
  ) {}

  async start(): Promise<this> {
    const port = await freePort();
    const main = resolve(__dirname, `../../../dist/apps/${this.app}/main.js`);
    // The test command builds first; a missing build is a failure, never a silent skip.
    if (!existsSync(main)) throw new Error(`${main} is missing: run npm run build (npm test does)`);
    const child = spawn(process.execPath, [main], {
      env: { ...process.env, NODE_ENV: 'test', SVC_DATA_DIR: this.dataDir, PORT: String(port), HOST: '127.0.0.1', ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    // This start's output only: after a restart, the first start's "listening at" is not this one's.
    this.output = '';
    await new Promise<void>((res, rej) => {
      const timer = setTimeout(() => rej(new Error(`standalone did not start: ${this.output}`)), 30000);
      const onData = (d: Buffer) => {
        this.output += d.toString();
        if (this.output.includes('listening at')) {
          clearTimeout(timer);
          res();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', (d: Buffer) => (this.output += d.toString()));
      child.once('exit', (code) => {
        clearTimeout(timer);
        rej(new Error(`standalone exited ${code}: ${this.output}`));
      });
    });
    this.baseUrl = `http://127.0.0.1:${port}/api`;
    this.api = new Api(this.baseUrl);
    return this;
  }

  /** SIGKILL: no shutdown hooks, no flush. */
  async kill9(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    await new Promise<void>((res) => {
      child.once('exit', () => res());
      child.kill('SIGKILL');
    });
    this.child = undefined;
  }
}
