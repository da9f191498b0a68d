/**
 * The port through which the runner calls a Destination. The module binds it to the HTTP client
 * in adapters/outbound/destination-client.ts (signed, one attempt, no redirects, guarded lookup
 * in production).
 */
export const DESTINATION_CLIENT = Symbol('DESTINATION_CLIENT');

export interface SignedCall {
  baseUrl: string;
  /** The step's path (already substituted and URL-encoded), may carry a query. */
  path: string;
  method: string;
  body: string | undefined;
  headers: Record<string, string>;
  secret: string;
  /**
   * The `x-svc-timestamp` to sign: the real Unix seconds of this call (WALL_CLOCK), not the service
   * clock, because the Destination compares it with its own clock.
   */
  nowS: number;
  timeoutMs: number;
  production: boolean;
}

export type CallOutcome =
  | { kind: 'response'; status: number; body: unknown; pathAndQuery: string }
  | { kind: 'failed'; reason: 'timeout' | 'network' | 'refused_address' | 'invalid_response' | 'invalid_request'; pathAndQuery: string };

export interface DestinationClientPort {
  /** One signed call; never rejects: what goes wrong is a `failed` outcome. */
  call(c: SignedCall): Promise<CallOutcome>;
}
