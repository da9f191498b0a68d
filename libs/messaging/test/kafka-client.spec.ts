import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '@svc/testing';
import { lastValueFrom } from 'rxjs';
import { busClient, BusUnavailableError } from '../src';

/**
 * A Kafka client's `send` waits for its reply consumer to have joined its group, but not for
 * ever: when no broker answers, the wait ends after the bound with BusUnavailableError (503
 * UNAVAILABLE at the HTTP edge). Needs no broker: nothing listens at the address given.
 */
describe('Kafka bus client', () => {
  it('a send whose reply consumer cannot join fails within the bound with UNAVAILABLE', async () => {
    const port = await freePort();
    const client = busClient('bounded-wait-test', {
      kind: 'kafka',
      brokers: [`127.0.0.1:${port}`],
      replyPatterns: ['bounded-wait-test.query'],
      replyWaitMs: 1500,
    });
    try {
      const started = Date.now();
      const err = await lastValueFrom(client.send('bounded-wait-test.query', { n: 1 })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(BusUnavailableError);
      expect(err).toMatchObject({ status: 503, code: 'UNAVAILABLE' });
      expect(Date.now() - started).toBeLessThan(6000);
    } finally {
      await client.close();
    }
  });

  it('without reply patterns the client only emits; a send is refused at once', async () => {
    const port = await freePort();
    const client = busClient('emit-only-test', { kind: 'kafka', brokers: [`127.0.0.1:${port}`], replyWaitMs: 1500 });
    try {
      const err = await lastValueFrom(client.send('emit-only-test.query', { n: 1 })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect((err as Error).message).toContain('emit-only-test.query');
    } finally {
      await client.close();
    }
  });

  it('a closed client stops trying to reach the broker: its process exits on its own soon after', async () => {
    const port = await freePort();
    const dir = join(__dirname, 'kafka-peer');
    const child = spawn(process.execPath, [join(__dirname, '../../testing/ts-register.js'), join(dir, 'closed-client.ts'), String(port)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let closedAt = 0;
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (!closedAt && out.includes('closed')) closedAt = Date.now();
    });
    const exited = await new Promise<number>((resolve) => {
      const kill = setTimeout(() => child.kill('SIGKILL'), 30_000);
      child.on('exit', () => {
        clearTimeout(kill);
        resolve(Date.now());
      });
    });
    expect(out).toContain('closed BusUnavailableError');
    // kafkajs alone would go on retrying the connection for about 10 s after the close.
    expect(exited - closedAt).toBeLessThan(3000);
  }, 40_000);
});
