import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { IncomingHttpHeaders, Server, createServer } from 'node:http';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { TestApp, tempDataDir } from '@svc/testing';

/**
 * The receiver package as a caller gets it: `npm pack` of packages/webhooks, the tarball installed
 * into a scratch folder with no network (it has no dependencies), loaded from there by plain Node
 * (not this repository's sources), verifies a webhook and a Destination call sent by the running
 * service, and its types compile in a TypeScript consumer.
 */

const PACKAGE_DIR = resolve(__dirname, '../../packages/webhooks');
const TSC = resolve(__dirname, '../../node_modules/typescript/bin/tsc');

function run(command: string, args: string[], cwd: string): string {
  const r = spawnSync(command, args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });
  if (r.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

interface Received {
  method: string;
  target: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
}

type Receiver = typeof import('../../packages/webhooks/src');

describe('the receiver package, packed and installed (e2e)', () => {
  const app = new TestApp();
  const scratch = tempDataDir('receiver-package-');
  let pkg: Receiver;
  let tarball = '';
  let server: Server;
  let base = '';
  const got: Received[] = [];

  beforeAll(async () => {
    // Pack (its prepack script builds dist/), then install the tarball offline into an empty project.
    const packs = join(scratch, 'packs');
    mkdirSync(packs);
    const [packed] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', packs], PACKAGE_DIR)) as { filename: string; files: { path: string }[] }[];
    tarball = join(packs, packed.filename);
    const consumer = join(scratch, 'consumer');
    mkdirSync(consumer);
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', version: '0.0.0', private: true }));
    run('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], consumer);
    // Loaded by Node itself from the scratch folder (no Jest transform, no path alias).
    pkg = createRequire(join(consumer, 'package.json'))('@svc/webhooks-receiver') as Receiver;

    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        got.push({ method: req.method!, target: req.url!, headers: req.headers, raw: Buffer.concat(chunks) });
        res.writeHead(200, { 'content-type': 'application/json' }).end(req.url!.startsWith('/hooks') ? '{}' : '{"orders":[]}');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    await app.start();
    await app.advanceClock(2 * 86_400); // a sandbox whose clock was moved: signatures are still real time
  }, 120_000);
  afterAll(async () => {
    await app.stop();
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('packs its build, README and package.json only, with no dependencies', () => {
    const listed = spawnSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
    expect(listed).toEqual(
      expect.arrayContaining(['package/package.json', 'package/README.md', 'package/dist/index.js', 'package/dist/index.d.ts', 'package/dist/events.d.ts']),
    );
    expect(listed.filter((f) => !/^package\/(package\.json|README\.md|dist\/.+\.(js|d\.ts))$/.test(f))).toEqual([]);
    const installed = JSON.parse(readFileSync(join(scratch, 'consumer/node_modules/@svc/webhooks-receiver/package.json'), 'utf8'));
    expect(installed).toMatchObject({ name: '@svc/webhooks-receiver', version: '1.0.0', main: 'dist/index.js', types: 'dist/index.d.ts' });
    expect(installed.dependencies ?? {}).toEqual({});
  });

  it('verifies a clinical_case.opened webhook delivered by the running service', async () => {
    const t = await app.tenant();
    const ep = await app.api.post(`${t.env}/webhook-endpoints`, { url: `${base}/hooks/svc`, events: ['clinical_case.opened'] }, t.staff);
    expect(ep.status).toBe(201);
    const { patientId } = await app.enrolledPatient(t);
    const opened = await app.api.post(`${t.env}/clinical-cases`, { patientId, request: 'Patient reports dizziness' }, t.staff);
    expect(opened.status).toBe(201);
    const delivery = await waitFor(() => got.find((g) => g.target === '/hooks/svc'));

    const event = pkg.verifyWebhook(delivery.raw, delivery.headers, ep.body.secret);
    expect(event.type).toBe('clinical_case.opened');
    if (event.type !== 'clinical_case.opened') throw new Error('narrowing');
    expect(event.data).toMatchObject({ caseId: opened.body.caseId, patientId, source: 'staff_chat' });
    // The installed package refuses what it must, with its own error class and reasons.
    const refuse = (fn: () => unknown) => {
      try {
        fn();
        return 'verified';
      } catch (e) {
        expect(e).toBeInstanceOf(pkg.WebhookVerificationError);
        return (e as { reason: string }).reason;
      }
    };
    expect(refuse(() => pkg.verifyWebhook(Buffer.concat([delivery.raw, Buffer.from('\n')]), delivery.headers, ep.body.secret))).toBe('BAD_SIGNATURE');
    expect(refuse(() => pkg.verifyWebhook(delivery.raw, delivery.headers, 'whsec_not_it'))).toBe('BAD_SIGNATURE');
    expect(refuse(() => pkg.verifyWebhook(delivery.raw, delivery.headers, ep.body.secret, { now: Date.now() + 3_600_000 }))).toBe('STALE_TIMESTAMP');
    expect(refuse(() => pkg.verifyWebhook(delivery.raw, {}, ep.body.secret))).toBe('MISSING_HEADER');
  });

  it('verifies the order lookup a workflow test run sends to a Destination', async () => {
    const t = await app.tenant();
    const rotated = await app.api.post(`${t.env}/secrets/rotate`, { kind: 'widget_signing' }, t.staff);
    const dest = await app.api.post(
      `${t.env}/destinations`,
      { stableKey: 'order_system', name: 'Orders', baseUrl: `${base}/shop`, headers: {}, timeoutMs: 3000 },
      t.staff,
    );
    expect(dest.status).toBe(201);
    const P = `${t.env}/conversation-workflows`;
    const wf = await app.api.post(`${P}/from-template`, { templateKey: 'order_status_tracking' }, t.staff);
    const tested = await app.api.post(
      `${P}/versions/${wf.body.draftVersionId}/test`,
      { expectedRevision: 1, opening: 'where is my order', replies: [], patientEmail: 'pat@example.test', patientId: 'ext-pkg-1' },
      t.staff,
    );
    expect(tested.status).toBe(201);
    const call = await waitFor(() => got.find((g) => g.target.startsWith('/shop/')));

    const verified = pkg.verifyDestinationCall({ method: call.method, url: call.target, rawBody: call.raw, headers: call.headers }, rotated.body.secret);
    expect(pkg.isOrderLookupRequested(verified.body)).toBe(true);
    expect(verified.body).toEqual({ version: 1, type: 'order_lookup.requested', requestId: tested.body.runId, patient: { externalId: 'ext-pkg-1' } });
    expect(() =>
      pkg.verifyDestinationCall({ method: call.method, url: '/orders/lookup', rawBody: call.raw, headers: call.headers }, rotated.body.secret),
    ).toThrow(pkg.WebhookVerificationError);
  });

  it('its types serve a TypeScript consumer (strict, node16 resolution through "exports")', () => {
    const consumer = join(scratch, 'consumer');
    writeFileSync(
      join(consumer, 'consumer.ts'),
      [
        "import { verifyWebhook, verifyDestinationCall, isOrderLookupRequested, WebhookVerificationError, type WebhookEvent, type OrderLookupResponse, type VerificationReason } from '@svc/webhooks-receiver';",
        'export function handle(raw: string, headers: Record<string, string>): string {',
        "  const event: WebhookEvent = verifyWebhook(raw, headers, 'whsec_x', { toleranceSeconds: 300 });",
        '  switch (event.type) {',
        "    case 'clinical_case.opened': return event.data.priority;",
        "    case 'subscription.updated': return event.data.status;",
        '    default: return event.type;',
        '  }',
        '}',
        'export function orders(raw: string, headers: Record<string, string>): OrderLookupResponse | null {',
        "  const call = verifyDestinationCall({ method: 'POST', url: '/orders/lookup', rawBody: raw, headers }, 'secret');",
        "  return isOrderLookupRequested(call.body) ? { orders: [{ id: call.body.patient.externalId, status: 'shipped' }] } : null;",
        '}',
        'export const reasonOf = (e: unknown): VerificationReason | null => (e instanceof WebhookVerificationError ? e.reason : null);',
        '',
      ].join('\n'),
    );
    // No @types of any kind in the consumer: the package's declarations stand on their own.
    for (const [module, moduleResolution] of [
      ['node16', 'node16'],
      ['commonjs', 'node10'],
    ]) {
      const config = `tsconfig.${moduleResolution}.json`;
      writeFileSync(
        join(consumer, config),
        JSON.stringify({
          compilerOptions: { noEmit: true, strict: true, target: 'es2022', lib: ['es2022'], module, moduleResolution, types: [] },
          files: ['consumer.ts'],
        }),
      );
      run(process.execPath, [TSC, '-p', config], consumer);
    }
  });
});

async function waitFor<T>(find: () => T | undefined, timeoutMs = 15_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = find();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('nothing arrived in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}
