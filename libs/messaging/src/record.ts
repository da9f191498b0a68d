import { BusHeaders } from './inproc/broker';

/**
 * A keyed message with headers: what an integration event looks like on the bus.
 * On Kafka, Nest's KafkaRequestSerializer sends it as `{ key, value, headers }` (the record is
 * keyed by aggregate id, metadata in headers); on the in-process bus, the handler's payload is
 * `value` and the key/headers are on its InProcessContext. Either way a consumer's
 * `@Payload()` is the value. (@nestjs/microservices 11.2 has no KafkaRecordBuilder; this is it.)
 */
export class BusRecord<T = unknown> {
  constructor(
    readonly key: string | null,
    readonly value: T,
    readonly headers: BusHeaders = {},
  ) {}
}

/** Builder in the style of Nest's record builders: `new BusRecordBuilder(value).setKey(k).setHeaders(h).build()`. */
export class BusRecordBuilder<T = unknown> {
  private key: string | null = null;
  private headers: BusHeaders = {};

  constructor(private value: T) {}

  setKey(key: string | null): this {
    this.key = key;
    return this;
  }

  setHeaders(headers: BusHeaders): this {
    this.headers = { ...this.headers, ...headers };
    return this;
  }

  setValue(value: T): this {
    this.value = value;
    return this;
  }

  build(): BusRecord<T> {
    return new BusRecord(this.key, this.value, this.headers);
  }
}

/** Header names carrying event metadata (the "every event carries metadata" rule). */
export const MetadataHeaders = {
  eventId: 'event-id',
  eventType: 'event-type',
  correlationId: 'correlation-id',
  causationId: 'causation-id',
  organizationId: 'organization-id',
  environmentId: 'environment-id',
  actor: 'actor',
  recordedAt: 'recorded-at',
  streamId: 'stream-id',
  position: 'position',
} as const;
