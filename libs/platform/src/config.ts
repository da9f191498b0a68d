import { resolve } from 'node:path';
import { CHECKPOINT_DEFAULTS, CHECKPOINT_MAX_EVENTS, DEFAULT_DATABASE_URL, DEFAULT_EVENT_SCHEMA, checkSchemaName } from '@svc/eventstore';
import { RATE_LIMIT_DEFAULTS, RateLimitSettings } from '@svc/http';
import ipaddr from 'ipaddr.js';
import { CorsPolicy, parseOrigins } from './cors';
import { smtpTlsProblem } from './mailer';

/** Every setting of README.md, "Running modes and settings", read once from the environment. */
export interface ServiceConfig {
  port: number;
  /** Listening address: `HOST`, else 127.0.0.1 while the dev tools are on, else 0.0.0.0 (docs/decisions.md, "Deployment safety"). */
  host: string;
  /** Most connections the listener holds open at once (`SVC_MAX_CONNECTIONS`); more are dropped. */
  maxConnections: number;
  dataDir: string;
  production: boolean;
  devTools: boolean;
  eventStore: 'sqlite' | 'postgres' | 'esdb';
  /** PostgreSQL event store: server address and the schema holding its tables. */
  databaseUrl: string;
  eventStoreSchema: string;
  esdbConnectionString: string;
  bus: 'inproc' | 'kafka';
  kafkaBrokers: string[];
  readStore: 'sqlite' | 'redis';
  redisUrl: string;
  /** Prefix of every Redis key (several deployments or test runs can share one Redis). */
  redisKeyPrefix: string;
  mail: 'outbox' | 'smtp';
  smtpUrl: string;
  mailFrom: string;
  /** Base URL of patient-facing links (check-in emails, case messages); https and required in production. */
  widgetBaseUrl: string | null;
  staffOidc: { issuer: string; jwksUrl: string; audience: string } | null;
  mfaMaxAgeS: number;
  /** Base64 master key (32 bytes); standalone generates one in the data dir when unset. */
  masterKey: string | null;
  /** Longest time a request may take to arrive, headers and body (slow senders are answered 408). */
  requestTimeoutMs: number;
  /** Browser origins allowed to call the API (CORS): the widget's and the staff app's. */
  cors: CorsPolicy;
  /** Token buckets per API key, staff subject and client address (SVC_RATE_LIMIT_*; SVC_RATE_LIMITS=off). */
  rateLimits: RateLimitSettings;
  /**
   * The proxies whose `X-Forwarded-For` names the client (SVC_TRUST_PROXY): none (false), the number
   * of proxy hops in front of the service, or their addresses and CIDR ranges. Decides the client
   * address that the per-address rate limit counts.
   */
  trustProxy: false | number | string[];
  /**
   * Distributed mode: the address the gateway reaches this app's listener at (`SVC_INTERNAL_URL`,
   * `http://host:port`); unset: `http://<HOST>:<port>` it listens on.
   */
  internalUrl: string | null;
  /** Gateway in distributed mode: longest wait for an app's answer to begin (SVC_UPSTREAM_TIMEOUT_MS); past it, 503 UNAVAILABLE. */
  upstreamTimeoutMs: number;
  /**
   * Checkpoints of the global log (docs/audit.md): one once `everyEvents` events came since the last
   * (SVC_CHAIN_CHECKPOINT_EVENTS), or `intervalS` seconds of real time passed and any came
   * (SVC_CHAIN_CHECKPOINT_INTERVAL_S).
   */
  chainCheckpoints: { everyEvents: number; intervalS: number };
  /** Leases of the jobs run once per cluster (docs/scaling.md): ttl (SVC_LEASE_TTL_MS) and renewal interval (SVC_LEASE_RENEW_MS, at most half the ttl). */
  leaseTtlMs: number;
  leaseRenewMs: number;
}

function pick<T extends string>(value: string | undefined, allowed: readonly T[], fallback: T, name: string): T {
  if (value === undefined || value === '') return fallback;
  if (!(allowed as readonly string[]).includes(value)) throw new Error(`${name} must be one of ${allowed.join(', ')}`);
  return value as T;
}

/** A whole number within [min, max] from a variable; anything else stops start-up (never NaN). */
function integer(value: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  const n = /^\d+$/.test(value.trim()) ? Number(value.trim()) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new Error(`${name} must be a whole number from ${min} to ${max}`);
  return n;
}

/**
 * Rate limits: on unless `SVC_RATE_LIMITS=off`. Each bucket's rate (`SVC_RATE_LIMIT_<KIND>_PER_S`)
 * and burst (`SVC_RATE_LIMIT_<KIND>_BURST`, default ten seconds' worth of the rate) are whole
 * numbers from 1; anything else stops start-up.
 */
function rateLimits(env: NodeJS.ProcessEnv): RateLimitSettings {
  const onOff = env.SVC_RATE_LIMITS;
  if (onOff !== undefined && onOff !== 'on' && onOff !== 'off') throw new Error('SVC_RATE_LIMITS must be on or off');
  const bucket = (kind: 'API_KEY' | 'STAFF' | 'ADDRESS', fallback: number) => {
    const ratePerS = integer(env[`SVC_RATE_LIMIT_${kind}_PER_S`], `SVC_RATE_LIMIT_${kind}_PER_S`, fallback, 1, 1_000_000);
    return { ratePerS, burst: integer(env[`SVC_RATE_LIMIT_${kind}_BURST`], `SVC_RATE_LIMIT_${kind}_BURST`, ratePerS * 10, 1, 10_000_000) };
  };
  return {
    enabled: onOff !== 'off',
    apiKey: bucket('API_KEY', RATE_LIMIT_DEFAULTS.apiKey.ratePerS),
    staff: bucket('STAFF', RATE_LIMIT_DEFAULTS.staff.ratePerS),
    address: bucket('ADDRESS', RATE_LIMIT_DEFAULTS.address.ratePerS),
  };
}

/** Names of address ranges SVC_TRUST_PROXY takes besides addresses and CIDRs (Fastify's proxy-addr). */
const PROXY_RANGE_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** SVC_TRUST_PROXY: unset (no proxy), a hop count, or a comma-separated list of addresses, CIDRs and range names. */
function trustProxy(value: string | undefined): ServiceConfig['trustProxy'] {
  if (value === undefined) return false;
  if (/^\d+$/.test(value.trim())) return integer(value, 'SVC_TRUST_PROXY', 0, 1, 100);
  const entries = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const e of entries) {
    if (!PROXY_RANGE_NAMES.has(e) && !ipaddr.isValid(e) && !ipaddr.isValidCIDR(e)) {
      throw new Error('SVC_TRUST_PROXY must be a number of proxy hops, or addresses, CIDR ranges and loopback/linklocal/uniquelocal, comma-separated');
    }
  }
  return entries.length ? entries : false;
}

/** SVC_INTERNAL_URL: an http origin (no path, query or credentials); anything else stops start-up. */
function internalUrl(value: string | undefined): string | null {
  if (value === undefined) return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error('SVC_INTERNAL_URL must be an http origin such as http://case-ledger:3000');
  }
  if (url.protocol !== 'http:' || url.username || url.password || url.search || url.hash || (url.pathname !== '/' && url.pathname !== '')) {
    throw new Error('SVC_INTERNAL_URL must be an http origin such as http://case-ledger:3000');
  }
  return url.origin;
}

/** The PostgreSQL event store's schema (EVENT_STORE_SCHEMA); a bad name stops start-up. */
function schemaName(value: string | undefined): string {
  try {
    return checkSchemaName(value ?? DEFAULT_EVENT_SCHEMA);
  } catch {
    throw new Error('EVENT_STORE_SCHEMA must be lower-case letters, digits and _, not starting with a digit, at most 48 characters');
  }
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * The staff ID-token issuer. In production its addresses must be https (a JWKS fetched over plain
 * http could be swapped on the way, and with it every staff identity), except on loopback.
 */
function staffOidc(env: NodeJS.ProcessEnv, production: boolean): ServiceConfig['staffOidc'] {
  const issuer = env.STAFF_OIDC_ISSUER;
  if (!issuer) {
    if (env.STAFF_OIDC_JWKS_URL || env.STAFF_OIDC_AUDIENCE) throw new Error('STAFF_OIDC_JWKS_URL and STAFF_OIDC_AUDIENCE need STAFF_OIDC_ISSUER');
    return null;
  }
  const jwksUrl = env.STAFF_OIDC_JWKS_URL ?? `${issuer.replace(/\/$/, '')}/.well-known/jwks.json`;
  for (const [name, value] of [
    ['STAFF_OIDC_ISSUER', issuer],
    ['STAFF_OIDC_JWKS_URL', jwksUrl],
  ] as const) {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new Error(`${name} must be an http(s) URL`);
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`${name} must be an http(s) URL`);
    if (production && url.protocol === 'http:' && !LOOPBACK.has(url.hostname)) throw new Error(`${name} must be https in production mode`);
  }
  return { issuer, jwksUrl, audience: env.STAFF_OIDC_AUDIENCE ?? 'svc-staff' };
}

/** Default of SVC_MAX_CONNECTIONS: far above what one process of the service serves, far below what exhausts it. */
export const DEFAULT_MAX_CONNECTIONS = 4096;

/**
 * The base of the links in patient emails. Any mode: an http(s) URL. Production: https, and set
 * (the default, the service's own `http://localhost` address, is neither reachable by a patient
 * nor encrypted; the link carries the check-in's token).
 */
function widgetBaseUrl(value: string | undefined, production: boolean): string | null {
  if (value !== undefined) {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw new Error('WIDGET_BASE_URL must be an http(s) URL');
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error('WIDGET_BASE_URL must be an http(s) URL');
    if (production && url.protocol !== 'https:') throw new Error('WIDGET_BASE_URL must be an https URL in production mode');
    return value;
  }
  if (production) throw new Error('WIDGET_BASE_URL must be an https URL in production mode (the address of the patient links in emails); it is not set');
  return null;
}

/** Production mode sends mail over TLS only (docs/decisions.md, "Deployment safety"). The message never repeats the URL (it may hold a password). */
function smtpUrl(value: string, mail: ServiceConfig['mail'], production: boolean): string {
  const problem = production && mail === 'smtp' ? smtpTlsProblem(value) : null;
  if (problem) throw new Error(`SMTP_URL must use TLS in production mode: ${problem}`);
  return value;
}

/**
 * `mode`: standalone (one process, all six apps) or distributed (one app per process). Dev tools
 * (README.md, "Running modes and settings") are never on in production mode; otherwise they are on in standalone
 * unless `SVC_DEV_TOOLS=0`, and off in distributed mode unless `SVC_DEV_TOOLS=1`.
 */
export function loadConfig(raw: NodeJS.ProcessEnv = process.env, mode: 'standalone' | 'distributed' = 'standalone'): ServiceConfig {
  // An empty variable counts as unset.
  const env = Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined && v !== '')) as NodeJS.ProcessEnv;
  const production = env.NODE_ENV === 'production';
  const devTools = !production && (mode === 'standalone' ? env.SVC_DEV_TOOLS !== '0' : env.SVC_DEV_TOOLS === '1');
  const mail = pick(env.MAIL, ['outbox', 'smtp'] as const, 'outbox', 'MAIL');
  const leaseTtlMs = integer(env.SVC_LEASE_TTL_MS, 'SVC_LEASE_TTL_MS', 5000, 200, 600_000);
  const leaseRenewMs = integer(env.SVC_LEASE_RENEW_MS, 'SVC_LEASE_RENEW_MS', Math.min(1000, Math.floor(leaseTtlMs / 3)), 20, 300_000);
  if (leaseRenewMs * 2 > leaseTtlMs) throw new Error('SVC_LEASE_RENEW_MS must be at most half of SVC_LEASE_TTL_MS');
  return {
    port: integer(env.PORT, 'PORT', 3000, 0, 65535),
    // The dev tools mint a staff token for any subject: reachable from this machine only, unless HOST says otherwise.
    host: env.HOST ?? (devTools ? '127.0.0.1' : '0.0.0.0'),
    maxConnections: integer(env.SVC_MAX_CONNECTIONS, 'SVC_MAX_CONNECTIONS', DEFAULT_MAX_CONNECTIONS, 1, 10_000_000),
    dataDir: resolve(env.SVC_DATA_DIR ?? './data'),
    production,
    devTools,
    eventStore: pick(env.EVENT_STORE, ['sqlite', 'postgres', 'esdb'] as const, 'sqlite', 'EVENT_STORE'),
    databaseUrl: env.DATABASE_URL ?? DEFAULT_DATABASE_URL,
    eventStoreSchema: schemaName(env.EVENT_STORE_SCHEMA),
    esdbConnectionString: env.ESDB_CONNECTION_STRING ?? 'kurrentdb://localhost:2113?tls=false',
    bus: pick(env.BUS, ['inproc', 'kafka'] as const, 'inproc', 'BUS'),
    kafkaBrokers: (env.KAFKA_BROKERS ?? 'localhost:9092')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    readStore: pick(env.READ_STORE, ['sqlite', 'redis'] as const, 'sqlite', 'READ_STORE'),
    redisUrl: env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    redisKeyPrefix: env.REDIS_KEY_PREFIX ?? 'svc',
    mail,
    smtpUrl: smtpUrl(env.SMTP_URL ?? 'smtp://localhost:1025', mail, production),
    mailFrom: env.MAIL_FROM ?? 'Care Team <care@svc.invalid>',
    widgetBaseUrl: widgetBaseUrl(env.WIDGET_BASE_URL, production),
    staffOidc: staffOidc(env, production),
    mfaMaxAgeS: integer(env.STAFF_MFA_MAX_AGE_S, 'STAFF_MFA_MAX_AGE_S', 3600, 1, 31_536_000),
    masterKey: env.SVC_MASTER_KEY ?? null,
    requestTimeoutMs: integer(env.SVC_REQUEST_TIMEOUT_MS, 'SVC_REQUEST_TIMEOUT_MS', 30_000, 1000, 600_000),
    cors: {
      widgetOrigins: parseOrigins(env.WIDGET_ALLOWED_ORIGINS, 'WIDGET_ALLOWED_ORIGINS', '*', true),
      staffOrigins: parseOrigins(env.STAFF_APP_ORIGINS, 'STAFF_APP_ORIGINS', [], false) as string[],
    },
    rateLimits: rateLimits(env),
    trustProxy: trustProxy(env.SVC_TRUST_PROXY),
    internalUrl: internalUrl(env.SVC_INTERNAL_URL),
    upstreamTimeoutMs: integer(env.SVC_UPSTREAM_TIMEOUT_MS, 'SVC_UPSTREAM_TIMEOUT_MS', 30_000, 100, 600_000),
    chainCheckpoints: {
      everyEvents: integer(env.SVC_CHAIN_CHECKPOINT_EVENTS, 'SVC_CHAIN_CHECKPOINT_EVENTS', CHECKPOINT_DEFAULTS.everyEvents, 1, CHECKPOINT_MAX_EVENTS),
      intervalS: integer(env.SVC_CHAIN_CHECKPOINT_INTERVAL_S, 'SVC_CHAIN_CHECKPOINT_INTERVAL_S', CHECKPOINT_DEFAULTS.intervalMs / 1000, 1, 86_400),
    },
    leaseTtlMs,
    leaseRenewMs,
  };
}

export const CONFIG = Symbol('CONFIG');
