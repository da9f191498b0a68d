import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A service process that crashes (an uncaught exception, an unhandled rejection) says so in one
 * structured log line, with the error's name and stack frames and never its message, and exits
 * with code 1 for its supervisor; nothing of the message reaches stderr either (Node's own report
 * would print it there).
 */
describe('exitOnCrash', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-crash-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each([
    ['rejection', 'RangeError', 'unhandled rejection; the process exits'],
    ['exception', 'TypeError', 'uncaught exception; the process exits'],
  ])('%s: one fatal line with the name and frames, exit code 1, no message anywhere', (kind, name, msg) => {
    const log = join(dir, `${kind}.log`);
    const child = spawnSync(process.execPath, [join(__dirname, '../../testing/ts-register.js'), join(__dirname, 'crash-child', 'crash.ts'), kind], {
      env: { ...process.env, SVC_LOG_FILE: log, SVC_LOG_LEVEL: 'info', SVC_SERVICE_NAME: 'crash-test' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(child.status).toBe(1);
    const lines = readFileSync(log, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { level: number; msg: string; service: string; err: { name: string; stack: string } });
    expect(lines).toEqual([expect.objectContaining({ level: 60, msg, service: 'crash-test', err: { name, stack: expect.stringContaining('crash.ts') } })]);
    for (const out of [readFileSync(log, 'utf8'), child.stderr, child.stdout]) {
      expect(out).not.toContain('Jane Roe');
      expect(out).not.toContain('second line');
    }
  });
});
