/**
 * The webhook bench's out-of-process caller: started by bench/webhooks-delivery.ts with
 * child_process.fork (dist/bench/open-client-child.js) when `--open-client child` (the default),
 * so the staff requests that open cases are made from their own event loop, as a real caller
 * (another system) would make them, instead of costing the service process's CPU.
 *
 * IPC from the parent: {type:'open', seq, url, token, bodies, concurrency} (closed loop: that many
 * callers, each sending its next request when the previous one answered) or with `rate` (open
 * loop: request i is due at start + i/rate, sent on a free keep-alive socket). Answers
 * {type:'opened', seq, items: [caseId, sentAt, answeredAt][], cpuMicros} or {type:'error', seq, error}.
 * Timestamps are performance.timeOrigin + performance.now(), the clock of the bench and receiver.
 */
import http from 'node:http';
import { runOpens } from './open-loop';

const now = () => performance.timeOrigin + performance.now();

type OpenJob = { type: 'open'; seq: number; url: string; token: string; bodies: string[]; concurrency: number; rate?: number };

function post(agent: http.Agent, url: URL, token: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: 'POST', agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 201) return reject(new Error(`open: ${res.statusCode} ${text}`));
          resolve((JSON.parse(text) as { caseId: string }).caseId);
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function run(job: OpenJob): Promise<[string, number, number][]> {
  const url = new URL(job.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.rate ? 256 : job.concurrency });
  try {
    return await runOpens(job.bodies, job.concurrency, job.rate, async (body): Promise<[string, number, number]> => {
      const sentAt = now();
      const caseId = await post(agent, url, job.token, body);
      return [caseId, sentAt, now()];
    });
  } finally {
    agent.destroy();
  }
}

process.on('message', (m: OpenJob) => {
  if (m.type !== 'open') return;
  run(m).then(
    (items) => {
      const cpu = process.cpuUsage();
      process.send!({ type: 'opened', seq: m.seq, items, cpuMicros: cpu.user + cpu.system });
    },
    (err) => process.send!({ type: 'error', seq: m.seq, error: String((err as Error)?.stack ?? err) }),
  );
});
process.on('disconnect', () => process.exit(0));
process.send!({ type: 'ready' });
