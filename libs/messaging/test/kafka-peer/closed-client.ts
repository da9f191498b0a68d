/**
 * A process whose only work is a Kafka bus client that cannot reach a broker (argv[2]: a port
 * nothing listens at): one send, refused within its bound, then close. Prints `closed`, then
 * leaves the process to exit by itself (kafka-client.spec.ts measures how soon it does).
 */
import { lastValueFrom } from 'rxjs';
import { busClient } from '../../src';

void (async () => {
  const client = busClient('closed-client-test', {
    kind: 'kafka',
    brokers: [`127.0.0.1:${process.argv[2]}`],
    replyPatterns: ['closed-client-test.query'],
    replyWaitMs: 1000,
  });
  const err = await lastValueFrom(client.send('closed-client-test.query', { n: 1 })).catch((e: unknown) => e);
  await client.close();
  process.stdout.write(`closed ${(err as Error).name}\n`);
})();
