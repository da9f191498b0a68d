import { ValidationError } from 'class-validator';

/** Error codes of the contract (docs/decisions.md, "Errors and the HTTP edge"), the widget's included. */
export type ErrorCode =
  | 'VALIDATION_FAILED'
  | 'INVALID_API_CREDENTIAL'
  | 'STAFF_AUTH_REQUIRED'
  | 'INVALID_IDENTITY_TOKEN'
  | 'SESSION_REQUIRED'
  | 'BAA_REQUIRED'
  | 'PERMISSION_REQUIRED'
  | 'MFA_REQUIRED'
  | 'ROLE_REQUIRED'
  | 'NOT_FOUND'
  | 'PAYLOAD_TOO_LARGE'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'IDEMPOTENCY_KEY_REUSED'
  | 'SEQUENCE_CONFLICT'
  | 'INVALID_TRANSITION'
  | 'CASE_RESOLVED'
  | 'OUT_OF_ORDER'
  | 'STALE_REVISION'
  | 'DUPLICATE_KEY'
  | 'VERSION_LOCKED'
  | 'WORKFLOW_ARCHIVED'
  | 'WORKFLOW_EVER_LIVE'
  | 'LAST_OWNER'
  | 'RATE_LIMITED'
  | 'PROTOCOL_NOT_FOUND'
  | 'PROTOCOL_AMBIGUOUS'
  | 'UNAVAILABLE'
  | 'INTERNAL_ERROR';

export interface ErrorDetail {
  path: string;
  message: string;
}

/** An error answered to the caller as `{ code, message, details? }` with its status. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode | string,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'ApiError';
  }

  static notFound(what = 'Resource'): ApiError {
    return new ApiError(404, 'NOT_FOUND', `${what} not found`);
  }

  static validation(details: ErrorDetail[], message = 'The request is not valid'): ApiError {
    return new ApiError(400, 'VALIDATION_FAILED', message, details);
  }
}

/** class-validator errors flattened to `{ path, message }`, paths like `attachments[0].sha256`. */
export function flattenValidationErrors(errors: ValidationError[], parent = ''): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  for (const e of errors) {
    const path = /^\d+$/.test(e.property) ? `${parent}[${e.property}]` : parent ? `${parent}.${e.property}` : e.property;
    for (const message of Object.values(e.constraints ?? {})) {
      out.push({ path, message: message.replace(/^property (\S+) should not exist$/, 'unknown field') });
    }
    if (e.children?.length) out.push(...flattenValidationErrors(e.children, path));
  }
  return out;
}
