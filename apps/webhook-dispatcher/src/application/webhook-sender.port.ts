import type { Resolver } from '@svc/security';
import type { Attempt } from '../domain/delivery';

/**
 * The port through which the application sends webhook attempts. The module binds it to
 * `WebhookSender` (adapters/outbound): signed POSTs on a worker thread of their own.
 */
export const WEBHOOK_SENDER = Symbol('WEBHOOK_SENDER');

export interface SendInput {
  url: string;
  /** The serialized envelope: sent byte for byte as signed. */
  payload: string;
  secret: string;
  eventId: string;
  eventType: string;
  /** Attempt time from the service clock (the attempt's record). */
  at: Date;
  /**
   * Real time of the attempt (WALL_CLOCK), signed as `x-svc-timestamp`: receivers compare it with
   * their own clocks, so it never follows the dev clock.
   */
  signedAt: Date;
  production: boolean;
  /** Tests only: the DNS answer the production guard checks (default: the system resolver). */
  resolve?: Resolver;
  /** Tests only: default DELIVERY_TIMEOUT_MS. */
  timeoutMs?: number;
}

export interface SendResult {
  attempt: Attempt;
  /**
   * Aborted before any byte of the request was handed to a connected socket (see `sendWebhook`'s
   * `signal`): the receiver cannot have seen it, so it is no attempt at all.
   */
  notSent?: true;
}

export interface WebhookSenderPort {
  /**
   * One attempt. `signal` (optional): aborting it ends the attempt if it is not yet on the wire
   * (the result then says `notSent`); one already written runs to its answer or deadline.
   */
  send(input: SendInput, signal?: AbortSignal): Promise<SendResult>;
  /** Releases what the sender holds (its thread); for after every attempt has ended. */
  close(): Promise<void>;
}
