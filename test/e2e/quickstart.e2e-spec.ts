import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { StandaloneProcess } from '@svc/testing';

/**
 * The README's quick start cannot rot: `scripts/quickstart.sh` runs against a freshly started
 * standalone process (the build, on a free port with a data dir of its own) and must go from nothing
 * to a delivered, verified webhook and the case's progress; the README's "Trying it" quotes the
 * script's own lines in the script's order, and its receiver is `scripts/webhook-receiver.js` verbatim.
 */

const root = join(__dirname, '../..');
const script = join(root, 'scripts', 'quickstart.sh');
const readme = () => readFileSync(join(root, 'README.md'), 'utf8');

/** The text of a `## ` section: from its heading to the next one. */
function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`no section "## ${heading}"`);
  const next = markdown.indexOf('\n## ', start + 1);
  return markdown.slice(start, next < 0 ? undefined : next);
}

function fencedBlocks(markdown: string, lang: string): string[] {
  return [...markdown.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]);
}

/** The README's quoted steps: the bash blocks of "Trying it" that begin with a step's comment (`# 3. …`). */
function quotedSteps(): string[] {
  return fencedBlocks(section(readme(), 'Trying it'), 'bash').filter((b) => /^# \d+\. /.test(b));
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runQuickstart(env: Record<string, string>): Promise<Run> {
  return new Promise((resolve, reject) => {
    const childEnv: NodeJS.ProcessEnv = { ...process.env };
    delete childEnv.RECEIVER_PORT;
    delete childEnv.QUICKSTART_WAIT_S;
    Object.assign(childEnv, env);
    // Asynchronous, so that this process keeps reading the service's output while the script runs.
    const child = spawn('bash', [script], { cwd: root, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), 150_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('README and the quick start script', () => {
  it("the README's receiver is scripts/webhook-receiver.js verbatim (and so is docs/webhooks.md's)", () => {
    const receiver = readFileSync(join(root, 'scripts', 'webhook-receiver.js'), 'utf8');
    expect(receiver).toContain("require('node:http')");
    const inReadme = fencedBlocks(section(readme(), 'Receiving webhooks'), 'js');
    expect(inReadme[0]).toBe(receiver);
    const webhooksGuide = readFileSync(join(root, 'docs', 'webhooks.md'), 'utf8');
    expect(fencedBlocks(section(webhooksGuide, 'Verify (copy-paste receiver)'), 'js')[0]).toBe(receiver);
  });

  it("every line quoted in 'Trying it' is the script's, in the script's order, and every step and curl call of the script is quoted", () => {
    const scriptLines = readFileSync(script, 'utf8').split('\n');
    const blocks = quotedSteps();
    // Every step of the script (its `# N. …` comments) has its block in the README, in order.
    const steps = scriptLines.filter((l) => /^# \d+\. /.test(l));
    expect(steps.length).toBeGreaterThanOrEqual(14);
    expect(blocks.map((b) => b.split('\n')[0])).toEqual(steps);

    let at = -1;
    for (const line of blocks.flatMap((b) => b.split('\n')).filter((l) => l.trim() !== '')) {
      const found = scriptLines.findIndex((l, i) => i > at && l === line);
      if (found < 0) throw new Error(`README line not in scripts/quickstart.sh (after line ${at + 1}): ${line}`);
      at = found;
    }
    // And the other way: every curl call the script makes is quoted.
    const quoted = new Set(blocks.flatMap((b) => b.split('\n')));
    const calls = scriptLines.filter((l) => /\bcurl -sS --fail-with-body\b/.test(l));
    expect(calls.length).toBeGreaterThanOrEqual(18);
    for (const call of calls) expect({ call, quoted: quoted.has(call) }).toEqual({ call, quoted: true });
    // No tools the quick start promises not to need.
    for (const l of scriptLines.filter((x) => !x.trim().startsWith('#'))) expect(l).not.toMatch(/\b(jq|uuidgen)\b/);
  });

  it('no shell example in the README or docs/ needs jq or uuidgen (node does their work)', () => {
    const docs = readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md'));
    const pages = [['README.md', readme()], ...docs.map((f) => [`docs/${f}`, readFileSync(join(root, 'docs', f), 'utf8')])];
    const offending = pages.flatMap(([name, text]) =>
      ['bash', 'sh', 'shell', 'console']
        .flatMap((lang) => fencedBlocks(text, lang))
        .flatMap((b) => b.split('\n'))
        .filter((l) => /(^|[\s|;(])(jq|uuidgen)\b/.test(l))
        .map((l) => `${name}: ${l}`),
    );
    expect(offending).toEqual([]);
  });
});

describe('scripts/quickstart.sh against a started standalone service (e2e)', () => {
  const service = new StandaloneProcess();

  beforeAll(async () => {
    await service.start();
  }, 60_000);
  afterAll(() => service.kill9());

  it('runs every step and ends with the webhook verified by the README receiver and the progress read', async () => {
    const run = await runQuickstart({ BASE_URL: service.baseUrl });
    if (run.code !== 0) throw new Error(`quickstart exited ${run.code}\n${run.stdout}\n${run.stderr}`);
    expect(run.stderr).not.toMatch(/FAILED/);
    for (let n = 0; n <= 13; n++) expect(run.stdout).toContain(`\n==> ${n}. `);
    const tail = run.stdout.trimEnd().split('\n').slice(-3);
    expect(tail[0]).toBe('==> Done');
    const eventId = /^ {4}webhook verified: clinical_case\.opened ([0-9a-f-]{36})$/.exec(tail[1])?.[1];
    expect(eventId).toBeDefined();
    expect(tail[2]).toMatch(/^ {4}progress read: case CC-[A-HJ-NP-Z2-9]{8} status processed, nextSequence 2, transportDelivered (true|false)$/);

    // The service's side, through its own API: the organization the script made has a delivery of
    // that very event, answered 200 by the receiver.
    const token = (await service.api.post('/dev/staff-tokens', { sub: 'ada', email: 'ada@example.com' })).body.idToken as string;
    const orgs = await service.api.get('/organizations', token);
    expect(orgs.status).toBe(200);
    expect(orgs.body.organizations).toHaveLength(1);
    const org = orgs.body.organizations[0];
    const env = `/organizations/${org.id}/environments/${org.environments.find((e: { kind: string }) => e.kind === 'sandbox').id}`;
    const endpoints = await service.api.get(`${env}/webhook-endpoints`, token);
    expect(endpoints.body.webhookEndpoints).toHaveLength(1);
    const deliveries = await service.api.get(`${env}/webhook-endpoints/${endpoints.body.webhookEndpoints[0].id}/deliveries`, token);
    expect(deliveries.body.deliveries).toEqual([
      expect.objectContaining({ eventId, eventType: 'clinical_case.opened', status: 'delivered', attempts: [expect.objectContaining({ statusCode: 200 })] }),
    ]);
  }, 180_000);

  it('stops at the failing step with a non-zero exit, naming the step and showing why', async () => {
    // The receiver cannot listen on the service's own port: step 5 fails after steps 0-4 ran for real.
    const port = new URL(service.baseUrl).port;
    const run = await runQuickstart({ BASE_URL: service.baseUrl, RECEIVER_PORT: port });
    expect(run.code).toBe(1);
    expect(run.stdout).toContain('==> 4. ');
    expect(run.stdout).not.toContain('==> 6. ');
    expect(run.stderr).toMatch(/quickstart: FAILED at "5\. [^"]*": the receiver did not start/);
    expect(run.stderr).toContain('EADDRINUSE');

    // An error status: the service's error body is shown.
    const wrong = await runQuickstart({ BASE_URL: `${service.baseUrl}/nope` });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/quickstart: FAILED at "0\. [^"]*": no service at/);
    expect(wrong.stderr).toContain('"code":"NOT_FOUND"');
  }, 120_000);
});
