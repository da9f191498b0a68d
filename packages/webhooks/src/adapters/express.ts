import { WebhookVerificationError } from '../verify';
import { AdapterOptions, RequestLike, rejectionBody, verifyDestinationRequest, verifyWebhookRequest } from './common';

/** The parts of an Express (or plain Node) response the middleware uses. */
export interface ResponseLike {
  statusCode: number;
  setHeader(name: string, value: string): unknown;
  end(body?: string): unknown;
}

export type ExpressMiddleware = (req: RequestLike, res: ResponseLike, next: (err?: unknown) => void) => void;

function middleware(verify: (req: RequestLike, options: AdapterOptions) => Promise<unknown>, options: AdapterOptions): ExpressMiddleware {
  return (req, res, next) => {
    verify(req, options).then(
      () => next(),
      (err: unknown) => {
        if (!(err instanceof WebhookVerificationError)) return next(err);
        res.statusCode = 400;
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(rejectionBody(err)));
        options.onRejected?.(err);
      },
    );
  };
}

/**
 * Express middleware for a webhook route: verifies the delivery, answers 400 `{ code, message }` when it
 * does not verify, else calls `next()`; the handler reads the event with `webhookEventOf(req)`.
 *
 * The raw bytes: put `express.raw({ type: 'application/json' })` before it on the route (or no body
 * parser at all: the middleware then reads the body itself). Not `express.json()` on this route: parsed
 * JSON is not the signed bytes.
 */
export function expressWebhook(options: AdapterOptions): ExpressMiddleware {
  return middleware(verifyWebhookRequest, options);
}

/**
 * Express middleware for the route a Destination calls (an order system's `POST /orders/lookup`): the
 * signature covers the method, `req.originalUrl` and the raw body. The handler reads the call with
 * `destinationCallOf(req)`. Same raw-body rule as `expressWebhook`.
 */
export function expressDestinationCall(options: AdapterOptions): ExpressMiddleware {
  return middleware(verifyDestinationRequest, options);
}
