import { createHmac, timingSafeEqual } from 'node:crypto';
import { IncomingMessage, Server, ServerResponse, createServer } from 'node:http';
import { performance } from 'node:perf_hooks';

/** One order, as an orders_v1 Destination answers it. */
export const ORDERS = {
  orders: [
    {
      id: 'A-1',
      status: 'shipped',
      statusLabel: null,
      carrier: 'UPS',
      trackingUrl: 'https://track.example/A-1',
      estimatedDelivery: null,
      placedAt: '2026-01-01',
      items: null,
    },
  ],
};

/** A real Destination on 127.0.0.1: checks the signature from the raw bytes, records when each call arrived. */
export class OrderDestination {
  server!: Server;
  baseUrl!: string;
  secret = '';
  /** performance.now() when each call's request arrived (headers read), and whether it verified. */
  arrivals: { at: number; signatureOk: boolean; externalId: string | null }[] = [];
  /** Answer delay (ms) of every call. */
  delayMs = 0;
  /** When set, each answer waits for it (a call held under way). */
  hold: Promise<void> | null = null;
  private releaseHold: (() => void) | null = null;
  /** Resolved whenever a call arrives. */
  private arrived: (() => void)[] = [];

  async start(): Promise<void> {
    this.server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const at = performance.now();
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', async () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const ts = String(req.headers['x-svc-timestamp'] ?? '');
        const sig = String(req.headers['x-svc-signature'] ?? '');
        const expected = `v1=${createHmac('sha256', this.secret).update(`${ts}.${req.method} ${req.url}\n${raw}`).digest('hex')}`;
        const signatureOk = sig.length === expected.length && timingSafeEqual(Buffer.from(sig), Buffer.from(expected));
        let externalId: string | null = null;
        try {
          externalId = JSON.parse(raw)?.patient?.externalId ?? null;
        } catch {
          externalId = null;
        }
        this.arrivals.push({ at, signatureOk, externalId });
        for (const f of this.arrived.splice(0)) f();
        const hold = this.hold;
        if (hold) await hold;
        if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
        res.writeHead(signatureOk ? 200 : 401, { 'content-type': 'application/json' }).end(signatureOk ? JSON.stringify(ORDERS) : '{}');
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  /** From now on, answers wait until `release()`. */
  holdCalls(): void {
    this.hold = new Promise<void>((r) => (this.releaseHold = r));
  }

  release(): void {
    this.releaseHold?.();
    this.releaseHold = null;
    this.hold = null;
  }

  /** Resolves once `n` calls have arrived in all. */
  async waitForCalls(n: number): Promise<void> {
    while (this.arrivals.length < n) await new Promise<void>((r) => this.arrived.push(r));
  }

  stop(): Promise<void> {
    return new Promise((r) => this.server.close(() => r()));
  }
}
