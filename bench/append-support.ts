/** What the event-store append benches share (eventstore-append, eventstore-append-pg): the event appended and a result row. */
import { randomUUID } from 'node:crypto';
import type { EventMetadata } from '@svc/eventstore';

/** The payload of the i-th event (about 170 bytes of JSON). */
export function payload(i: number) {
  return { caseId: `case-${i}`, sequence: i, note: 'x'.repeat(120) };
}

/** Metadata as the service writes it, with fresh ids. */
export function metadata(): EventMetadata {
  return {
    eventId: randomUUID(),
    correlationId: randomUUID(),
    causationId: null,
    organizationId: 'org_bench',
    environmentId: 'env_bench',
    actor: 'system',
    recordedAt: new Date().toISOString(),
  };
}

/** One measured line of a bench's table. */
export interface Row {
  label: string;
  writers: number;
  appends: number;
  seconds: number;
  perSecond: number;
  avgBatch?: number;
  /** CPU time of this process (every thread) per append, in microseconds. */
  cpuUsPerAppend?: number;
}
