import { resolve } from 'node:path';
import { CorsPolicy, parseOrigins } from './cors';

/** Every setting of decisions section 1, read once from the environment. */
export interface ServiceConfig {
  port: number;
  host: string;
  dataDir: string;
  production: boolean;
  devTools: boolean;
  eventStore: 'sqlite' | 'esdb';
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
  /** Base URL of patient-facing links (check-in emails, case messages). */
  widgetBaseUrl: string | null;
  staffOidc: { issuer: string; jwksUrl: string; audience: string } | null;
  mfaMaxAgeS: number;
  /** Base64 master key (32 bytes); standalone generates one in the data dir when unset. */
  masterKey: string | null;
  /** Browser origins allowed to call the API (CORS): the widget's and the staff app's. */
  cors: CorsPolicy;
}

function pick<T extends string>(value: string | undefined, allowed: readonly T[], fallback: T, name: string): T {
  if (value === undefined || value === '') return fallback;
  if (!(allowed as readonly string[]).includes(value)) throw new Error(`${name} must be one of ${allowed.join(', ')}`);
  return value as T;
}

/**
 * `mode`: standalone (one process, all six apps) or distributed (one app per process). Dev tools
 * (decisions sections 1-2) are never on in production mode; otherwise they are on in standalone
 * unless `SVC_DEV_TOOLS=0`, and off in distributed mode unless `SVC_DEV_TOOLS=1`.
 */
export function loadConfig(raw: NodeJS.ProcessEnv = process.env, mode: 'standalone' | 'distributed' = 'standalone'): ServiceConfig {
  // An empty variable counts as unset.
  const env = Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined && v !== '')) as NodeJS.ProcessEnv;
  const production = env.NODE_ENV === 'production';
  const issuer = env.STAFF_OIDC_ISSUER;
  return {
    port: Number(env.PORT ?? 3000),
    host: env.HOST ?? '0.0.0.0',
    dataDir: resolve(env.SVC_DATA_DIR ?? './data'),
    production,
    devTools: !production && (mode === 'standalone' ? env.SVC_DEV_TOOLS !== '0' : env.SVC_DEV_TOOLS === '1'),
    eventStore: pick(env.EVENT_STORE, ['sqlite', 'esdb'] as const, 'sqlite', 'EVENT_STORE'),
    esdbConnectionString: env.ESDB_CONNECTION_STRING ?? 'kurrentdb://localhost:2113?tls=false',
    bus: pick(env.BUS, ['inproc', 'kafka'] as const, 'inproc', 'BUS'),
    kafkaBrokers: (env.KAFKA_BROKERS ?? 'localhost:9092').split(',').map((s) => s.trim()).filter(Boolean),
    readStore: pick(env.READ_STORE, ['sqlite', 'redis'] as const, 'sqlite', 'READ_STORE'),
    redisUrl: env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    redisKeyPrefix: env.REDIS_KEY_PREFIX ?? 'svc',
    mail: pick(env.MAIL, ['outbox', 'smtp'] as const, 'outbox', 'MAIL'),
    smtpUrl: env.SMTP_URL ?? 'smtp://localhost:1025',
    mailFrom: env.MAIL_FROM ?? 'Care Team <care@svc.invalid>',
    widgetBaseUrl: env.WIDGET_BASE_URL ?? null,
    staffOidc: issuer ? { issuer, jwksUrl: env.STAFF_OIDC_JWKS_URL ?? `${issuer.replace(/\/$/, '')}/.well-known/jwks.json`, audience: env.STAFF_OIDC_AUDIENCE ?? 'svc-staff' } : null,
    mfaMaxAgeS: Number(env.STAFF_MFA_MAX_AGE_S ?? 3600),
    masterKey: env.SVC_MASTER_KEY ?? null,
    cors: {
      widgetOrigins: parseOrigins(env.WIDGET_ALLOWED_ORIGINS, 'WIDGET_ALLOWED_ORIGINS', '*', true),
      staffOrigins: parseOrigins(env.STAFF_APP_ORIGINS, 'STAFF_APP_ORIGINS', [], false) as string[],
    },
  };
}

export const CONFIG = Symbol('CONFIG');
