/**
 * @svc/webhooks-receiver: verify the patient-care integration service's webhooks and Destination calls.
 * No runtime dependencies (node:crypto only).
 */
export * from './events';
export { DEFAULT_TOLERANCE_SECONDS, SIGNATURE_PATTERN, TIMESTAMP_PATTERN, signDestinationCall, signWebhook, signatureMatches } from './signing';
export {
  VERIFICATION_REASONS,
  WebhookVerificationError,
  headerValue,
  isOrderLookupRequested,
  pathAndQueryOf,
  verifyDestinationCall,
  verifyWebhook,
} from './verify';
export type { DestinationRequest, HeadersLike, VerificationReason, VerifiedDestinationCall, VerifyOptions } from './verify';
export { MAX_BODY_BYTES, destinationCallOf, rawBodyOf, webhookEventOf } from './adapters/common';
export type { AdapterOptions, RequestLike } from './adapters/common';
export { expressDestinationCall, expressWebhook } from './adapters/express';
export type { ExpressMiddleware, ResponseLike } from './adapters/express';
export { fastifyDestinationCall, fastifyWebhook } from './adapters/fastify';
export type { FastifyInstanceLike, FastifyPluginLike, FastifyReplyLike } from './adapters/fastify';
export { DestinationCallGuard, WebhookGuard } from './adapters/nestjs';
export type { ExecutionContextLike, NestGuardOptions } from './adapters/nestjs';
