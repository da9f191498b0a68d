import { ApiError, ErrorDetail } from './errors';

/**
 * The path parameters the contract types as uuid (contracts/openapi.yaml, `format: uuid`), by the
 * name every route gives them. A contract test holds this list to the contract both ways: every
 * uuid path parameter of openapi.yaml is here, and nothing else is (a member's `sub` is no uuid).
 */
export const UUID_PATH_PARAMS: ReadonlySet<string> = new Set([
  'orgId',
  'envId',
  'keyId',
  'endpointId',
  'deliveryId',
  'protocolId',
  'patientId',
  'checkInId',
  'caseId',
  'conversationId',
  'messageId',
  'profileId',
  'versionId',
  'destinationId',
]);

/**
 * The shape OpenAPI's `format: uuid` accepts (RFC 9562's 8-4-4-4-12 hex digits, any case): a value
 * the contract allows is never refused here; a well-formed id that names nothing is the route's 404.
 */
const UUID_SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * 400 `VALIDATION_FAILED` naming each uuid path parameter of the request that is not a uuid
 * (docs/decisions.md, "Path parameters"), or undefined. The edge asks it once the caller is authenticated (StaffGuard,
 * BodyProblemGuard for every other Nest route, `registerLeanRoute`), before anything is looked up.
 */
export function uuidParamProblem(params: unknown): ApiError | undefined {
  if (!params || typeof params !== 'object') return undefined;
  let details: ErrorDetail[] | undefined;
  for (const [name, value] of Object.entries(params as Record<string, unknown>)) {
    // An empty segment is no parameter at all: the route is not found (as Nest's Fastify adapter answers it).
    if (!UUID_PATH_PARAMS.has(name) || value === '' || (typeof value === 'string' && UUID_SHAPE.test(value))) continue;
    (details ??= []).push({ path: name, message: `${name} must be a uuid` });
  }
  return details ? ApiError.validation(details, 'A path parameter is not a uuid') : undefined;
}
