import { Server, Socket, createConnection, createServer } from 'node:net';

/**
 * A real TCP forwarder on 127.0.0.1 in front of a real server (Redis, PostgreSQL, a Kafka broker),
 * so a test can take the server away from a client without touching the server itself:
 * - `hang()`: connections stay open but carry nothing (bytes are held, not dropped), like a
 *   dependency that stopped answering; `resume()` delivers what was held and goes on.
 * - `close()`: the listener and every connection close; new connections are refused, like a
 *   dependency that is down.
 */
export class TcpForwarder {
  private server: Server | undefined;
  private readonly pairs = new Set<{ client: Socket; upstream: Socket; held: { to: Socket; chunk: Buffer }[] }>();
  private hung = false;
  private listeningPort = 0;

  constructor(
    readonly targetHost: string,
    readonly targetPort: number,
  ) {}

  /** `host:port` of a URL's server (`redis://127.0.0.1:6379`, `postgres://u@localhost/db`). */
  static target(url: string, defaultPort: number): { host: string; port: number } {
    const u = new URL(url);
    return { host: u.hostname === 'localhost' || u.hostname === '' ? '127.0.0.1' : u.hostname, port: u.port ? Number(u.port) : defaultPort };
  }

  get port(): number {
    return this.listeningPort;
  }

  async start(): Promise<this> {
    const server = createServer((client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.listeningPort = (server.address() as { port: number }).port;
    return this;
  }

  private accept(client: Socket): void {
    const upstream = createConnection({ host: this.targetHost, port: this.targetPort });
    const pair = { client, upstream, held: [] as { to: Socket; chunk: Buffer }[] };
    this.pairs.add(pair);
    const relay = (from: Socket, to: Socket) =>
      from.on('data', (chunk: Buffer) => {
        if (this.hung) pair.held.push({ to, chunk });
        else to.write(chunk);
      });
    relay(client, upstream);
    relay(upstream, client);
    const end = () => {
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  }

  /** Connections stay open and carry nothing until `resume()`. */
  hang(): void {
    this.hung = true;
  }

  /** Delivers what was held, in order, and forwards again. */
  resume(): void {
    this.hung = false;
    for (const pair of this.pairs) for (const { to, chunk } of pair.held.splice(0)) if (!to.destroyed) to.write(chunk);
  }

  /** Closes the listener and every connection through it: new connections are refused. */
  async close(): Promise<void> {
    for (const pair of this.pairs) {
      pair.client.destroy();
      pair.upstream.destroy();
    }
    this.pairs.clear();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
