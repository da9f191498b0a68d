/**
 * The webhook bench's out-of-process receiver: started by bench/webhooks-delivery.ts with
 * child_process.fork (dist/bench/webhook-receiver-child.js), so the receiver runs on its own event
 * loop (its own core on a multi-core machine) instead of competing with the service, as a real
 * receiver (another system) would.
 *
 * A node:http server on 127.0.0.1 (ephemeral port) that reads each request's raw bytes, verifies the
 * signature with `verifyWebhook` (the compiled libs/security, by relative path after tsc-alias, as
 * the bench imports it), answers 200, and reports arrivals to the parent over IPC in batches
 * (at most every 5 ms or every 256 arrivals): [key, at, createdAt] with key = data.caseId ?? envelope id,
 * at = performance.timeOrigin + performance.now() (the same clock the parent uses; see the bench) and
 * createdAt = the envelope's createdAt in ms since the epoch.
 *
 * IPC from the parent: {type:'secret', secret, seq} (flushes pending arrivals, then acks
 * {type:'ack', seq}), {type:'flush', seq} (same, no secret change); acks carry
 * bad and cpuMicros (this process's user + system CPU time so far). To the parent:
 * {type:'listening', port}, {type:'arrivals', items, bad} (bad = verification failures so far).
 */
import { createServer } from 'node:http';
import { verifyWebhook } from '@svc/security';

const now = () => performance.timeOrigin + performance.now();
let secret = '';
let bad = 0;
let badSent = 0;
let pending: [string, number, number][] = [];
let timer: NodeJS.Timeout | null = null;

type Msg = { type: 'secret'; secret: string; seq: number } | { type: 'flush'; seq: number };

function flush(): void {
  if (timer) {
    clearTimeout(timer);
    timer = null;
  }
  if (pending.length === 0 && bad === badSent) return;
  const items = pending;
  pending = [];
  badSent = bad;
  process.send!({ type: 'arrivals', items, bad });
}

function schedule(): void {
  if (pending.length >= 256) flush();
  else if (!timer) timer = setTimeout(flush, 5);
}

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', async () => {
    const rawBody = Buffer.concat(chunks);
    try {
      const env = await verifyWebhook<{ caseId?: string }>({ rawBody, headers: req.headers as Record<string, string>, secret, seen: null, toleranceSec: 3600 });
      pending.push([env.data.caseId ?? env.id, now(), Date.parse(env.createdAt)]);
    } catch {
      bad++;
    }
    schedule();
    res.writeHead(200).end();
  });
});

process.on('message', (m: Msg) => {
  if (m.type === 'secret') secret = m.secret;
  flush();
  const cpu = process.cpuUsage();
  process.send!({ type: 'ack', seq: m.seq, bad, cpuMicros: cpu.user + cpu.system });
});
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => process.send!({ type: 'listening', port: (server.address() as { port: number }).port }));
