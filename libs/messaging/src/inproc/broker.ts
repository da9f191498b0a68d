/**
 * A process-wide in-process message broker: the bus of standalone mode.
 *
 * - Request/reply: one handler per pattern (registering a second one is an error).
 * - Events: any number of subscribers per pattern; every subscriber gets every event.
 * - Nothing passes by reference: every message and every reply is serialized to a JSON string
 *   when it is sent and parsed by the receiver (each subscriber parses its own copy), so a
 *   handler sees exactly what it would see over Kafka (a Date arrives as an ISO string).
 * - Delivery is asynchronous: handlers run from `setImmediate`, after the send call returned.
 */

/** Transport-level headers of a message (Kafka headers in distributed mode). */
export type BusHeaders = Record<string, string>;

/** What a receiver gets: a parsed copy of what was sent. */
export interface BrokerMessage<T = unknown> {
  pattern: string;
  data: T;
  /** Partition key (the aggregate/stream id for integration events), when the sender gave one. */
  key?: string | null;
  headers?: BusHeaders;
}

/** A reply packet, as Nest's `WritePacket` (err / response / isDisposed). */
export interface ReplyPacket {
  err?: unknown;
  response?: unknown;
  isDisposed?: boolean;
}

export type RequestHandler = (message: BrokerMessage, reply: (packet: ReplyPacket) => void) => void;
export type EventHandler = (message: BrokerMessage) => Promise<unknown> | unknown;

export interface SendOptions {
  key?: string | null;
  headers?: BusHeaders;
}

export interface InProcessBrokerOptions {
  /**
   * When true (default), the promise returned by `publish` settles only after every subscriber
   * has finished handling the event (its handler's errors are reported to `onError`, never to the
   * publisher). A relay that awaits the publish then advances its checkpoint only after the
   * event was handled: the in-process equivalent of "the broker has it durably".
   */
  awaitSubscribers?: boolean;
  /** Where subscriber failures go (default: console.error with the pattern only, no payload). */
  onError?: (error: unknown, pattern: string) => void;
}

/** A published event that one or more subscribers failed to handle (the publisher should retry). */
export class SubscriberFailedError extends Error {
  constructor(
    readonly pattern: string,
    readonly failed: number,
  ) {
    super(`${failed} subscriber(s) of ${pattern} failed`);
    this.name = 'SubscriberFailedError';
  }
}

/** Error payload sent back when a request pattern has no handler. */
export const NO_HANDLER_ERROR = (pattern: string) => ({
  status: 503,
  code: 'NO_HANDLER',
  message: `There is no matching message handler defined for pattern ${pattern}.`,
});

/**
 * Turns anything thrown into a JSON-safe error payload: plain objects stay as they are;
 * an Error keeps its name, message and own enumerable fields (status, code, details, ...).
 */
export function toErrorPayload(err: unknown): unknown {
  if (err instanceof Error) {
    const rpc = err as Error & { getError?: () => unknown };
    if (typeof rpc.getError === 'function' && err.name === 'RpcException') {
      const inner = rpc.getError();
      return typeof inner === 'object' && inner !== null ? inner : { status: 'error', message: String(inner) };
    }
    const out: Record<string, unknown> = { name: err.name, message: err.message };
    for (const [k, v] of Object.entries(err)) if (k !== 'stack') out[k] = v;
    return out;
  }
  return err === undefined ? { status: 'error', message: 'Unknown error' } : err;
}

function serialize(value: unknown): string {
  // `undefined` has no JSON form; it travels as null.
  return JSON.stringify(value === undefined ? null : value);
}

/** A payload already serialized by the sender (sent as is, not serialized again). */
export class JsonPayload {
  constructor(readonly json: string) {}
}

function envelope(pattern: string, data: unknown, options: SendOptions): string {
  const body = data instanceof JsonPayload ? data.json : serialize(data);
  return `{"pattern":${JSON.stringify(pattern)},"data":${body},"key":${serialize(options.key ?? null)},"headers":${serialize(options.headers ?? {})}}`;
}

export class InProcessBroker {
  private readonly requestHandlers = new Map<string, RequestHandler>();
  private readonly eventHandlers = new Map<string, Set<EventHandler>>();
  private readonly awaitSubscribers: boolean;
  private readonly onError: (error: unknown, pattern: string) => void;

  constructor(options: InProcessBrokerOptions = {}) {
    this.awaitSubscribers = options.awaitSubscribers ?? true;
    this.onError =
      options.onError ??
      ((error, pattern) => {
        const e = error as { name?: string; code?: string } | null;
        console.error(`[in-process bus] event handler failed on ${pattern}: ${e?.name ?? 'error'} ${e?.code ?? ''}`.trim());
      });
  }

  /** Registers the request handler of `pattern`. Returns the unregister function. */
  handle(pattern: string, handler: RequestHandler): () => void {
    if (this.requestHandlers.has(pattern)) {
      throw new Error(`In-process bus: a request handler for "${pattern}" is already registered`);
    }
    this.requestHandlers.set(pattern, handler);
    return () => {
      if (this.requestHandlers.get(pattern) === handler) this.requestHandlers.delete(pattern);
    };
  }

  /** Adds an event subscriber to `pattern`. Returns the unsubscribe function. */
  subscribe(pattern: string, handler: EventHandler): () => void {
    let set = this.eventHandlers.get(pattern);
    if (!set) this.eventHandlers.set(pattern, (set = new Set()));
    // A wrapper, so that the same function subscribed twice counts twice.
    const entry: EventHandler = (m) => handler(m);
    set.add(entry);
    return () => {
      const s = this.eventHandlers.get(pattern);
      s?.delete(entry);
      if (s && s.size === 0) this.eventHandlers.delete(pattern);
    };
  }

  /**
   * Readiness (GET /readyz): the broker lives in this process and delivers from `setImmediate`, so
   * it answers as soon as this process's event loop comes round to it.
   */
  ping(): Promise<void> {
    return new Promise((resolve) => setImmediate(resolve));
  }

  hasRequestHandler(pattern: string): boolean {
    return this.requestHandlers.has(pattern);
  }

  subscriberCount(pattern: string): number {
    return this.eventHandlers.get(pattern)?.size ?? 0;
  }

  /**
   * Sends a request. The message is serialized now; the handler runs later and each reply
   * packet is serialized by the handler side and parsed here before `onReply` sees it.
   * Returns a teardown: after it, replies are dropped.
   */
  request(pattern: string, data: unknown, onReply: (packet: ReplyPacket) => void, options: SendOptions = {}): () => void {
    let closed = false;
    const deliverReply = (json: string) =>
      setImmediate(() => {
        if (closed) return;
        const packet = JSON.parse(json) as ReplyPacket;
        if (packet.err !== undefined || packet.isDisposed) closed = true;
        onReply(packet);
      });
    let json: string;
    try {
      json = envelope(pattern, data, options);
    } catch (e) {
      deliverReply(serialize({ err: toErrorPayload(e), isDisposed: true }));
      return () => void (closed = true);
    }
    setImmediate(() => {
      if (closed) return;
      const handler = this.requestHandlers.get(pattern);
      if (!handler) {
        deliverReply(serialize({ err: NO_HANDLER_ERROR(pattern), isDisposed: true }));
        return;
      }
      const reply = (packet: ReplyPacket) => {
        let out: string;
        try {
          out = serialize(packet.err !== undefined ? { ...packet, err: toErrorPayload(packet.err) } : packet);
        } catch (e) {
          out = serialize({ err: toErrorPayload(e), isDisposed: true });
        }
        deliverReply(out);
      };
      try {
        handler(JSON.parse(json) as BrokerMessage, reply);
      } catch (e) {
        reply({ err: e, isDisposed: true });
      }
    });
    return () => void (closed = true);
  }

  /**
   * Publishes an event to every current subscriber of `pattern` (none: dropped, no error).
   * Serialized now, delivered later. Resolves with the number of subscribers it was delivered
   * to, after they all handled it (or right after the hand-off with `awaitSubscribers: false`).
   * Rejects when the event cannot be serialized, or (awaiting subscribers) when a subscriber failed.
   */
  publish(pattern: string, data: unknown, options: SendOptions = {}): Promise<number> {
    let json: string;
    try {
      json = envelope(pattern, data, options);
    } catch (e) {
      return Promise.reject(e);
    }
    const handlers = [...(this.eventHandlers.get(pattern) ?? [])];
    if (handlers.length === 0) return Promise.resolve(0);
    const deliveries = handlers.map(
      (h) =>
        new Promise<boolean>((resolve) =>
          setImmediate(async () => {
            try {
              await h(JSON.parse(json) as BrokerMessage);
              resolve(true);
            } catch (e) {
              this.onError(e, pattern);
              resolve(false);
            }
          }),
        ),
    );
    if (!this.awaitSubscribers) return Promise.resolve(handlers.length);
    // A subscriber that failed must get the event again: the publish rejects (after every
    // subscriber ran), so a relay retries it rather than moving its checkpoint past it. Consumers
    // dedupe by event id, so the subscribers that succeeded take the retry as a no-op.
    return Promise.all(deliveries).then((ok) => {
      const failed = ok.filter((x) => !x).length;
      if (failed > 0) throw new SubscriberFailedError(pattern, failed);
      return handlers.length;
    });
  }
}

const DEFAULT_BROKER = Symbol.for('svc.messaging.inproc.default-broker');

/** The process-wide broker that `busServerStrategy` / `busClient` use in `BUS=inproc` mode. */
export function defaultBroker(): InProcessBroker {
  const g = globalThis as unknown as Record<symbol, InProcessBroker | undefined>;
  return (g[DEFAULT_BROKER] ??= new InProcessBroker());
}
