/* eslint-disable @typescript-eslint/no-explicit-any, @typescript-eslint/no-unsafe-function-type -- overrides of Nest's ClientProxy members, whose signatures are typed with any and Function */
import { ClientProxy, ReadPacket, WritePacket } from '@nestjs/microservices';
import { Observable } from 'rxjs';
import { BusRecord } from '../record';
import { defaultBroker, InProcessBroker, JsonPayload, SendOptions } from './broker';

export type InProcessClientStatus = 'connected' | 'closed';

/**
 * Nest ClientProxy over an {@link InProcessBroker}.
 * - `send(pattern, data)`: request/reply; the observable gets the reply or errors with the
 *   handler's error payload (e.g. `{ status: 409, code: 'OUT_OF_ORDER', message }`); no handler
 *   → errors with `{ status: 503, code: 'NO_HANDLER' }`.
 * - `emit(pattern, data)`: event to every subscriber; none → dropped, no error. The observable
 *   completes when the subscribers have handled it (see InProcessBrokerOptions.awaitSubscribers).
 * A {@link BusRecord} as data travels as its `value`, with key and headers beside it.
 * The payload is serialized at the `send`/`emit` call, so later mutations by the caller do not leak.
 */
export class InProcessClient extends ClientProxy<Record<never, Function>, InProcessClientStatus> {
  constructor(private readonly broker: InProcessBroker = defaultBroker()) {
    super();
    this.initializeSerializer({} as never);
    this.initializeDeserializer({} as never);
  }

  override send<TResult = any, TInput = any>(pattern: any, data: TInput): Observable<TResult> {
    return super.send(pattern, Snapshot.of(data) as TInput);
  }

  override emit<TResult = any, TInput = any>(pattern: any, data: TInput): Observable<TResult> {
    return super.emit(pattern, Snapshot.of(data) as TInput);
  }

  async connect(): Promise<InProcessBroker> {
    this._status$.next('connected');
    return this.broker;
  }

  close(): void {
    this._status$.next('closed');
  }

  unwrap<T>(): T {
    return this.broker as T;
  }

  protected publish(packet: ReadPacket, callback: (packet: WritePacket) => void): () => void {
    const { data, options } = Snapshot.open(packet.data);
    return this.broker.request(this.normalizePattern(packet.pattern), data, callback, options);
  }

  protected async dispatchEvent<T = any>(packet: ReadPacket): Promise<T> {
    const { data, options } = Snapshot.open(packet.data);
    await this.broker.publish(this.normalizePattern(packet.pattern), data, options);
    return undefined as T;
  }
}

/** A payload frozen as JSON at the call site (undefined/nil payloads pass through for Nest's checks). */
class Snapshot {
  private constructor(
    readonly json: string,
    readonly options: SendOptions,
  ) {}

  static of(data: unknown): unknown {
    if (data === null || data === undefined) return data;
    try {
      if (data instanceof BusRecord) {
        return new Snapshot(JSON.stringify(data.value ?? null), { key: data.key, headers: { ...data.headers } });
      }
      return new Snapshot(JSON.stringify(data), {});
    } catch {
      return data; // unserializable: the broker reports the error when it tries
    }
  }

  static open(data: unknown): { data: unknown; options: SendOptions } {
    if (data instanceof Snapshot) return { data: new JsonPayload(data.json), options: data.options };
    if (data instanceof BusRecord) return { data: data.value, options: { key: data.key, headers: data.headers } };
    return { data, options: {} };
  }
}
