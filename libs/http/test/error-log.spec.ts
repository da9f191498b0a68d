import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyReply } from 'fastify';
import { BusUnavailableError } from '@svc/messaging';
import { sendError } from '@svc/http';

/**
 * What the HTTP edge logs of an error it answers: a 503 (a dependency away; the client retries)
 * is a warning with the error's name and the answer's code; a 500 is an error with its stack.
 * Neither carries the error's message (lower layers may quote data in it).
 */
describe('sendError logging', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-error-log-'));
  const file = join(dir, 'service.log');
  const before = { file: process.env.SVC_LOG_FILE, level: process.env.SVC_LOG_LEVEL };

  beforeAll(() => {
    // Read by the logger when first used, which is in this file (Jest gives each file its modules).
    process.env.SVC_LOG_FILE = file;
    process.env.SVC_LOG_LEVEL = 'info';
  });

  afterAll(() => {
    for (const [key, value] of [
      ['SVC_LOG_FILE', before.file],
      ['SVC_LOG_LEVEL', before.level],
    ] as const) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  /** The status sendError answered, and the log lines it wrote. */
  function answer(err: unknown): { status: number; lines: Record<string, unknown>[] } {
    let status = 0;
    const reply = {
      header: () => reply,
      status: (s: number) => ((status = s), reply),
      send: () => reply,
    } as unknown as FastifyReply;
    let seen = 0;
    try {
      seen = readFileSync(file, 'utf8').length;
    } catch {
      seen = 0;
    }
    sendError(err, reply);
    const lines = readFileSync(file, 'utf8')
      .slice(seen)
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    return { status, lines };
  }

  it('a 503 is a warning naming the error and the code, without a stack or a message', () => {
    const { status, lines } = answer(new BusUnavailableError('patient-pathway.query.patient-contact'));
    expect(status).toBe(503);
    expect(lines).toEqual([expect.objectContaining({ level: 40, msg: 'request answered 503', code: 'UNAVAILABLE', err: { name: 'BusUnavailableError' } })]);
    expect(JSON.stringify(lines)).not.toContain('patient-contact');
  });

  it('a 500 is an error with the stack frames, without any line of the message', () => {
    const { status, lines } = answer(new TypeError('cannot read the note\nof patient Jane Roe (a message over two lines)'));
    expect(status).toBe(500);
    expect(lines).toEqual([expect.objectContaining({ level: 50, msg: 'unhandled error', err: expect.objectContaining({ name: 'TypeError' }) })]);
    expect((lines[0].err as { stack: string }).stack).toContain('error-log.spec');
    expect(JSON.stringify(lines)).not.toContain('Jane Roe');
  });
});
