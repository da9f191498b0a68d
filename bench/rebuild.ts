/**
 * Read-model rebuild rate: `svc rebuild --all` (the real bin, as an operator runs it) over a data
 * set made through the store's append API (not HTTP, to be quick), on the SQLite event store and
 * on PostgreSQL, beside, on the same log in the same run: a plain read of the log (no payload
 * opened), the same command with its AES-GCM on the main thread (SVC_REBUILD_CRYPTO_THREADS=0),
 * and the service's own catch-up: the ProjectionRunner of every app started on an empty read store
 * until it has caught up (what a service does at start when its read store is gone).
 *
 *   npm run build && node dist/bench/rebuild.js [--events 200000] [--stores sqlite,postgres] [--dir PATH] [--runner on|off]
 *
 * The data set is cases as the service writes them: per case a case stream (CaseRegistered,
 * clinical_case.opened, two CaseUpdateAccepted) and a conversation stream (ConversationStarted,
 * three ConversationMessageAppended, one MessageDeliveryReported): 9 events, appended through the
 * service's layering (encryption at rest over the hash chain), so the rebuild opens sealed payloads
 * and the projections seal what they store, as in the service. PostgreSQL: DATABASE_URL (default
 * the local server), a schema of its own per run, dropped after. A benchmark, not a test: never in CI.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { DEFAULT_DATABASE_URL, EventMetadata, EventStore, PostgresEventStore, SqliteEventStore } from '@svc/eventstore';
import { serviceEventStore } from '@svc/platform';
import { ProjectionRunner, SqliteReadStore } from '@svc/read-store';
import { Keyring } from '@svc/security';
import { caseLedgerProjections } from '@apps/case-ledger';
import { conversationProjections } from '@apps/conversation';
import { gatewayProjections } from '@apps/gateway';
import { patientPathwayProjections } from '@apps/patient-pathway';
import { webhookDispatcherProjections } from '@apps/webhook-dispatcher';
import { workflowEngineProjections } from '@apps/workflow-engine';

interface Args {
  events: number;
  stores: ('sqlite' | 'postgres')[];
  dir?: string;
  runner: boolean;
  url: string;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { events: 200_000, stores: ['sqlite', 'postgres'], runner: true, url: process.env.DATABASE_URL || DEFAULT_DATABASE_URL };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--events') args.events = Number(next());
    else if (a === '--stores') args.stores = next().split(',') as Args['stores'];
    else if (a === '--dir') args.dir = next();
    else if (a === '--runner') args.runner = next() !== 'off';
    else if (a === '--help' || a === '-h') {
      console.log('usage: node dist/bench/rebuild.js [--events N] [--stores sqlite,postgres] [--dir PATH] [--runner on|off]');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!(args.events >= 9) || args.stores.some((s) => s !== 'sqlite' && s !== 'postgres')) throw new Error('bad --events or --stores');
  return args;
}

const EVENTS_PER_CASE = 9;

/** One case's two streams, as the service writes them. */
async function appendCase(store: EventStore, orgId: string, envId: string, at: Date): Promise<void> {
  const caseId = randomUUID();
  const patientId = randomUUID();
  const iso = (plusMs: number) => new Date(at.getTime() + plusMs).toISOString();
  const meta = (): EventMetadata => ({
    eventId: randomUUID(),
    correlationId: caseId,
    causationId: null,
    organizationId: orgId,
    environmentId: envId,
    actor: 'bench',
    recordedAt: at.toISOString(),
  });
  await store.append(
    `case-ledger-case-${caseId}`,
    [
      {
        type: 'CaseRegistered',
        data: {
          caseId,
          organizationId: orgId,
          environmentId: envId,
          reference: `C-${caseId.slice(0, 8)}`,
          openedAt: iso(0),
          confirmationDueAt: iso(3_600_000),
          internalNote: 'Review the medication plan with the patient',
        },
        metadata: meta(),
      },
      {
        type: 'clinical_case.opened',
        data: {
          caseId,
          patientId,
          priority: 'routine',
          source: 'staff_chat',
          patientNotes: 'Dizzy after the new dose',
          symptomScores: { dizziness: 3 },
          matchedRules: [],
          stoppedEarly: false,
        },
        metadata: meta(),
      },
      {
        type: 'CaseUpdateAccepted',
        data: {
          caseId,
          updateId: randomUUID(),
          sequence: 1,
          status: 'processed',
          externalReference: 'ehr-1',
          acceptedAt: iso(60_000),
          scheduledFor: null,
          resolutionOutcome: null,
          resolutionNote: null,
        },
        metadata: meta(),
      },
      {
        type: 'CaseUpdateAccepted',
        data: {
          caseId,
          updateId: randomUUID(),
          sequence: 2,
          status: 'resolved',
          externalReference: 'ehr-2',
          acceptedAt: iso(120_000),
          scheduledFor: null,
          resolutionOutcome: 'advice_given',
          resolutionNote: 'Dose lowered',
        },
        metadata: meta(),
      },
    ],
    'no_stream',
  );
  const messages = [0, 1, 2].map((i) => ({
    id: randomUUID(),
    sequence: i + 1,
    sender: i % 2 ? 'patient' : 'provider',
    message: `Message ${i} about the dose`,
    externalMessageId: `x-${i}`,
    attachments: [],
    createdAt: iso(180_000 + i),
  }));
  await store.append(
    `conversation-conversation-${caseId}`,
    [
      {
        type: 'ConversationStarted',
        data: { conversationId: caseId, kind: 'case', organizationId: orgId, environmentId: envId, patientId, startedAt: iso(0) },
        metadata: meta(),
      },
      ...messages.map((m) => ({ type: 'ConversationMessageAppended', data: { conversationId: caseId, ...m }, metadata: meta() })),
      {
        type: 'MessageDeliveryReported',
        data: { conversationId: caseId, messageId: messages[0].id, status: 'delivered', errorCode: null, externalMessageId: 'x-0', reportedAt: iso(200_000) },
        metadata: meta(),
      },
    ],
    'no_stream',
  );
}

async function fill(store: EventStore, events: number): Promise<number> {
  const cases = Math.ceil(events / EVENTS_PER_CASE);
  const orgId = randomUUID();
  const envs = [randomUUID(), randomUUID()];
  const at = new Date('2026-05-01T09:00:00Z');
  let next = 0;
  const started = Date.now();
  // 32 writers: the store's group commit makes the fill quick.
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      while (next < cases) {
        const i = next++;
        await appendCase(store, orgId, envs[i % 2], at);
      }
    }),
  );
  const head = await store.headPosition();
  console.log(
    `  data set: ${head.toLocaleString('en-US')} events (${cases.toLocaleString('en-US')} cases) appended in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  return head;
}

/** `svc rebuild --all --json` as a child process: its own figure (replay and swap) and the wall time of the process. */
function runCli(
  env: Record<string, string>,
  threads?: number,
): { events: number; seconds: number; replay: number; replace: number; rate: number; wall: number; cpu: number; mainCpu: number | null } {
  // dist/bench/rebuild.js → the checkout's root.
  const root = join(__dirname, '..', '..');
  const started = process.hrtime.bigint();
  // SVC_BENCH_CPU_PROF=<dir>: a CPU profile of the rebuild process there.
  const prof = process.env.SVC_BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.SVC_BENCH_CPU_PROF}`] : [];
  const r = spawnSync(process.execPath, [...prof, join(root, 'bin', 'svc.js'), 'rebuild', '--all', '--json'], {
    cwd: root,
    env: { ...process.env, SVC_CLI_BUILD: '0', ...env, ...(threads === undefined ? {} : { SVC_REBUILD_CRYPTO_THREADS: String(threads) }) },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  const wall = Number(process.hrtime.bigint() - started) / 1e9;
  if (r.status !== 0) throw new Error(`svc rebuild failed (${r.status}): ${r.stderr}`);
  const summary = r.stdout
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l))
    .find((x) => x.kind === 'summary');
  return {
    events: summary.events,
    seconds: summary.seconds,
    replay: summary.replaySeconds,
    replace: summary.replaceSeconds,
    rate: summary.eventsPerSecond,
    wall,
    cpu: summary.cpuSeconds,
    mainCpu: summary.mainThreadCpuSeconds,
  };
}

/** A plain read of the log as stored (pages of 5000, no payload opened): the floor under any rebuild. */
async function readLog(store: EventStore, head: number): Promise<number> {
  const started = process.hrtime.bigint();
  let from = 0;
  while (from < head) {
    const page = await store.readAll(from, 5000);
    if (!page.length) break;
    from = page[page.length - 1].position;
  }
  return Number(process.hrtime.bigint() - started) / 1e9;
}

/** The service's own catch-up: every app's projections on an empty SQLite read store, until at the head. */
async function runRunner(events: EventStore, keyring: Keyring, dir: string, head: number): Promise<number> {
  const file = join(dir, `runner-${randomUUID()}.sqlite`);
  const readStore = new SqliteReadStore(file);
  const runner = new ProjectionRunner({ eventStore: events, readStore, logger: { warn: () => undefined } });
  for (const p of [
    ...gatewayProjections(keyring),
    ...patientPathwayProjections(keyring),
    ...caseLedgerProjections(keyring),
    ...conversationProjections(keyring),
    ...workflowEngineProjections(keyring),
    ...webhookDispatcherProjections(keyring),
  ])
    runner.register(p);
  const started = process.hrtime.bigint();
  await runner.start();
  await runner.caughtUp(head, 600_000);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  await runner.stop();
  await readStore.close();
  rmSync(file, { force: true });
  return seconds;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const dir = args.dir ?? mkdtempSync(join(tmpdir(), 'bench-rebuild-'));
  const key = randomBytes(32);
  writeFileSync(join(dir, 'master.key'), key.toString('base64'), { mode: 0o600 });
  const keyring = new Keyring(key);
  console.log(`rebuild bench: ${args.events.toLocaleString('en-US')} events, node ${process.version}, data dir ${dir}`);
  try {
    for (const kind of args.stores) {
      console.log(`\n${kind === 'sqlite' ? 'SQLite event store' : 'PostgreSQL event store'} (read store: SQLite)`);
      const schema = `bench_rebuild_${randomBytes(4).toString('hex')}`;
      const raw: EventStore =
        kind === 'sqlite' ? new SqliteEventStore(join(dir, 'events.sqlite')) : await PostgresEventStore.open({ connectionString: args.url, schema });
      const env: Record<string, string> =
        kind === 'sqlite'
          ? { SVC_DATA_DIR: dir, EVENT_STORE: 'sqlite' }
          : { SVC_DATA_DIR: dir, EVENT_STORE: 'postgres', DATABASE_URL: args.url, EVENT_STORE_SCHEMA: schema };
      try {
        const events = serviceEventStore(raw, keyring);
        const head = await fill(events, args.events);
        await raw.close();
        for (const suffix of ['', '-wal', '-shm']) rmSync(join(dir, `read-models.sqlite${suffix}`), { force: true });
        const reader: EventStore =
          kind === 'sqlite' ? new SqliteEventStore(join(dir, 'events.sqlite')) : await PostgresEventStore.open({ connectionString: args.url, schema });
        try {
          const seconds = await readLog(reader, head);
          console.log(
            `  plain read of the log (no payload opened): ${head.toLocaleString('en-US')} events in ${seconds.toFixed(2)} s = ${Math.round(head / seconds).toLocaleString('en-US')} events/s`,
          );
        } finally {
          await reader.close();
        }
        // The same command with its AES-GCM on the main thread (SVC_REBUILD_CRYPTO_THREADS=0), then as shipped.
        for (const threads of [0, undefined]) {
          for (const suffix of ['', '-wal', '-shm']) rmSync(join(dir, `read-models.sqlite${suffix}`), { force: true });
          const cli = runCli(env, threads);
          const label = threads === 0 ? 'svc rebuild --all, crypto threads 0' : 'svc rebuild --all';
          console.log(
            `  ${label}: ${cli.events.toLocaleString('en-US')} events in ${cli.seconds.toFixed(2)} s = ${cli.rate.toLocaleString('en-US')} events/s (replay ${cli.replay.toFixed(2)} s, swap ${cli.replace.toFixed(2)} s; process wall time ${cli.wall.toFixed(2)} s, start-up included)`,
          );
          const perMain = cli.mainCpu
            ? `, main thread ${cli.mainCpu.toFixed(2)} s = ${Math.round(cli.events / cli.mainCpu).toLocaleString('en-US')} events per main-thread CPU second`
            : '';
          console.log(`    CPU: all threads ${cli.cpu.toFixed(2)} s${perMain}`);
        }
        if (args.runner) {
          const reopened: EventStore =
            kind === 'sqlite' ? new SqliteEventStore(join(dir, 'events.sqlite')) : await PostgresEventStore.open({ connectionString: args.url, schema });
          try {
            const seconds = await runRunner(serviceEventStore(reopened, keyring), keyring, dir, head);
            console.log(
              `  service catch-up (ProjectionRunner, empty read store): ${head.toLocaleString('en-US')} events in ${seconds.toFixed(2)} s = ${Math.round(head / seconds).toLocaleString('en-US')} events/s`,
            );
          } finally {
            await reopened.close();
          }
        }
      } finally {
        if (kind === 'postgres') {
          const c = new Client({ connectionString: args.url });
          await c.connect();
          await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
          await c.end();
        } else {
          for (const suffix of ['', '-wal', '-shm']) rmSync(join(dir, `events.sqlite${suffix}`), { force: true });
        }
      }
    }
  } finally {
    if (!args.dir) rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
