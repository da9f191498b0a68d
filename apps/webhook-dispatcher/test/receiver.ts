import { createServer, IncomingHttpHeaders, Server, ServerResponse } from 'node:http';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A plain HTTP server on 127.0.0.1 for sender tests: records each request's headers and raw body
 * in `got`, and answers with `answer` (settable at any time; default 200 "ok").
 */
export class RecordingServer {
  readonly got: { headers: IncomingHttpHeaders; body: Buffer }[] = [];
  answer: (res: ServerResponse) => void = (res) => res.writeHead(200).end('ok');
  port = 0;
  private server: Server | undefined;

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.got.push({ headers: req.headers, body: Buffer.concat(chunks) });
        this.answer(res);
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }
}

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  rawBody: Buffer;
  status: number;
  /** Real time (ms since the epoch) when the request had arrived whole. */
  arrivedAt: number;
}

/**
 * A real webhook receiver on 127.0.0.1 (node:http): records the raw bytes and headers of every
 * request, answers from a per-path script of statuses (last one repeats; default 200).
 */
export class WebhookReceiver {
  private server: Server | undefined;
  readonly received: Received[] = [];
  private readonly scripts = new Map<string, number[]>();
  private readonly delays = new Map<string, number[]>();
  baseUrl = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = req.url ?? '/';
        const script = this.scripts.get(path) ?? [200];
        const status = script.length > 1 ? script.shift()! : script[0];
        const delays = this.delays.get(path) ?? [0];
        const delay = delays.length > 1 ? delays.shift()! : delays[0];
        this.received.push({ path, headers: req.headers, rawBody: Buffer.concat(chunks), status, arrivedAt: Date.now() });
        setTimeout(() => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(status < 300 ? '{"ok":true}' : '{"error":"nope"}');
        }, delay);
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
    return this;
  }

  /** Statuses answered on `path`, in order (the last one repeats), each after its delay in ms (recorded on arrival). */
  script(path: string, statuses: number[], delaysMs: number[] = [0]): string {
    this.scripts.set(path, [...statuses]);
    this.delays.set(path, [...delaysMs]);
    return `${this.baseUrl}${path}`;
  }

  on(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  async waitFor(path: string, count: number, timeoutMs = 10_000): Promise<Received[]> {
    const until = Date.now() + timeoutMs;
    while (this.on(path).length < count) {
      if (Date.now() > until) throw new Error(`receiver ${path}: ${this.on(path).length} of ${count} requests after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 25));
    }
    return this.on(path);
  }

  async stop(): Promise<void> {
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

/** JSON Schema (2020-12) validators of contracts/events, with ajv (present in node_modules, transitively). */
export function eventSchemas(): (type: string, payload: unknown) => string[] {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const Ajv2020 = require('ajv/dist/2020').default;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const addFormats = require('ajv-formats');
  const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true });
  addFormats(ajv);
  const dir = join(__dirname, '../../../contracts/events');
  const byType = new Map<string, (x: unknown) => boolean>();
  for (const f of readdirSync(dir)) {
    const schema = JSON.parse(readFileSync(join(dir, f), 'utf8'));
    const validate = ajv.compile(schema);
    const t = schema.properties?.type;
    if (!t) continue; // e.g. the order lookup response schema: not an event
    for (const type of t.const ? [t.const] : t.enum) byType.set(type, validate);
  }
  return (type, payload) => {
    const v = byType.get(type) as ((x: unknown) => boolean) & { errors?: { instancePath: string; message: string }[] };
    if (!v) return [`no schema for ${type}`];
    return v(payload) ? [] : (v.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
  };
}

export async function until<T>(fn: () => Promise<T | undefined | null | false>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
