import { WebhookVerificationError } from '../verify';
import { AdapterOptions, RequestLike, verifyDestinationRequest, verifyWebhookRequest } from './common';

/** The part of Nest's ExecutionContext a guard uses. */
export interface ExecutionContextLike {
  switchToHttp(): { getRequest<T = unknown>(): T };
}

export interface NestGuardOptions extends AdapterOptions {
  /**
   * What to throw for a refused request. Default: the WebhookVerificationError itself, which Nest answers
   * 400 (it carries `statusCode`). Pass e.g. `(e) => new BadRequestException({ code: e.reason, message: e.message })`
   * for Nest's own exception and no error log line.
   */
  toHttpException?: (error: WebhookVerificationError) => unknown;
}

abstract class SignatureGuard {
  constructor(private readonly options: NestGuardOptions) {}

  protected abstract verify(req: RequestLike, options: AdapterOptions): Promise<unknown>;

  async canActivate(context: ExecutionContextLike): Promise<boolean> {
    const req = context.switchToHttp().getRequest<RequestLike>();
    try {
      await this.verify(req, this.options);
      return true;
    } catch (err) {
      if (!(err instanceof WebhookVerificationError)) throw err;
      this.options.onRejected?.(err);
      throw this.options.toHttpException ? this.options.toHttpException(err) : err;
    }
  }
}

/**
 * NestJS guard for a webhook route (Express or Fastify platform): `@UseGuards(new WebhookGuard({ secret }))`,
 * then `webhookEventOf(req)` in the handler. The raw bytes: create the app with
 * `NestFactory.create(AppModule, { rawBody: true })` (Nest keeps them in `req.rawBody`).
 */
export class WebhookGuard extends SignatureGuard {
  protected verify(req: RequestLike, options: AdapterOptions): Promise<unknown> {
    return verifyWebhookRequest(req, options);
  }
}

/** NestJS guard for the route a Destination calls; `destinationCallOf(req)` in the handler. Same `rawBody: true` rule. */
export class DestinationCallGuard extends SignatureGuard {
  protected verify(req: RequestLike, options: AdapterOptions): Promise<unknown> {
    return verifyDestinationRequest(req, options);
  }
}
