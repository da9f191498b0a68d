/**
 * Contract checks for contracts/openapi.yaml: it is a valid OpenAPI 3.1.0 document (validated by
 * @apidevtools/swagger-parser), and it keeps the project's conventions (spec "Errors",
 * "Authentication", "Versioning"; docs/decisions.md, "Dev tools and the dev clock", "Staff access", "Errors and the HTTP edge"). Structural checks read the raw
 * YAML so `$ref`s can be followed by hand; the validator gets the file path (it dereferences).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
import { parse } from 'yaml';

const file = join(__dirname, '..', '..', 'contracts', 'openapi.yaml');

type Obj = Record<string, any>;
const doc: Obj = parse(readFileSync(file, 'utf8'));

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace'] as const;
const ERROR_REF = '#/components/schemas/Error';
const SERVICE_TAGS = ['gateway', 'dev', 'patient-pathway', 'case-ledger', 'conversation', 'webhook-dispatcher', 'workflow-engine'];

/** Follow a local `$ref` (`#/a/b`) to its target; anything else is returned as is. */
function deref(node: Obj | undefined): Obj | undefined {
  let current = node;
  const seen = new Set<string>();
  while (current && typeof current.$ref === 'string') {
    const ref: string = current.$ref;
    if (!ref.startsWith('#/')) throw new Error(`non-local $ref ${ref}`);
    if (seen.has(ref)) throw new Error(`$ref cycle at ${ref}`);
    seen.add(ref);
    current = ref
      .slice(2)
      .split('/')
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce<Obj | undefined>((o, key) => (o ? o[key] : undefined), doc);
    if (current === undefined) throw new Error(`unresolved $ref ${ref}`);
  }
  return current;
}

/** True when the schema is the Error schema, or an allOf that includes it. */
function usesErrorSchema(schema: Obj | undefined): boolean {
  if (!schema) return false;
  if (schema.$ref === ERROR_REF) return true;
  if (Array.isArray(schema.allOf)) return schema.allOf.some((s: Obj) => usesErrorSchema(s));
  return false;
}

function errorCodesOf(response: Obj | undefined): string[] {
  const schema = deref(response)?.content?.['application/json']?.schema as Obj | undefined;
  const codes: string[] = [];
  for (const part of schema?.allOf ?? []) {
    const code = part?.properties?.code;
    if (code?.const) codes.push(code.const);
    if (Array.isArray(code?.enum)) codes.push(...code.enum);
  }
  return codes;
}

interface Operation {
  path: string;
  method: string;
  op: Obj;
  params: Obj[];
}

const operations: Operation[] = Object.entries<Obj>(doc.paths ?? {}).flatMap(([path, item]) =>
  METHODS.filter((m) => item[m]).map((method) => ({
    path,
    method,
    op: item[method] as Obj,
    params: [...(item.parameters ?? []), ...(item[method].parameters ?? [])].map((p: Obj) => deref(p) as Obj),
  })),
);
const label = (o: Operation) => `${o.method.toUpperCase()} ${o.path}`;

describe('contracts/openapi.yaml', () => {
  it('is a valid OpenAPI document (swagger-parser)', async () => {
    const api = (await SwaggerParser.validate(file)) as Obj;
    expect(api.openapi).toBe('3.1.0');
  });

  it('is OpenAPI 3.1.0, interface version 1.0.0, served under /api locally', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('1.0.0');
    expect((doc.servers ?? []).map((s: Obj) => s.url)).toContain('http://localhost:3000/api');
  });

  it('declares the three bearer security schemes', () => {
    const schemes = doc.components.securitySchemes;
    for (const name of ['apiKey', 'staffToken', 'widgetSession']) {
      expect(schemes[name]).toMatchObject({ type: 'http', scheme: 'bearer' });
    }
    expect(schemes.staffToken.bearerFormat).toBe('JWT');
    expect(schemes.apiKey.description).toMatch(/svc_sb_/);
    expect(schemes.apiKey.description).toMatch(/svc_prod_/);
  });

  it('has the Error schema and the reusable error responses with their codes', () => {
    const error = doc.components.schemas.Error;
    expect(error.required).toEqual(expect.arrayContaining(['code', 'message']));
    expect(error.properties.details.items).toEqual({ $ref: '#/components/schemas/ErrorDetail' });
    expect(doc.components.schemas.ErrorDetail.required).toEqual(expect.arrayContaining(['path', 'message']));

    const r = doc.components.responses;
    expect(errorCodesOf(r.ValidationFailed)).toEqual(['VALIDATION_FAILED']);
    expect(errorCodesOf(r.InvalidApiCredential)).toEqual(['INVALID_API_CREDENTIAL']);
    expect(errorCodesOf(r.StaffAuthRequired)).toEqual(['STAFF_AUTH_REQUIRED']);
    expect(errorCodesOf(r.BaaRequired)).toEqual(['BAA_REQUIRED']);
    expect(errorCodesOf(r.StaffForbidden).sort()).toEqual(['MFA_REQUIRED', 'PERMISSION_REQUIRED', 'ROLE_REQUIRED']);
    expect(errorCodesOf(r.IntegrationSetupForbidden).sort()).toEqual(['MFA_REQUIRED', 'PERMISSION_REQUIRED', 'ROLE_REQUIRED']);
    expect(errorCodesOf(r.LastOwner)).toEqual(['LAST_OWNER']);
    expect(errorCodesOf(r.NotFound)).toEqual(['NOT_FOUND']);
    expect(errorCodesOf(r.Conflict)).toEqual(
      expect.arrayContaining(['IDEMPOTENCY_KEY_REUSED', 'SEQUENCE_CONFLICT', 'INVALID_TRANSITION', 'CASE_RESOLVED', 'OUT_OF_ORDER', 'LAST_OWNER']),
    );
    expect(errorCodesOf(r.PayloadTooLarge)).toEqual(['PAYLOAD_TOO_LARGE']);
    expect(errorCodesOf(r.UnsupportedMediaType)).toEqual(['UNSUPPORTED_MEDIA_TYPE']);
    expect(errorCodesOf(r.RateLimited)).toEqual(['RATE_LIMITED']);
    expect(deref(r.RateLimited.headers['Retry-After'])).toMatchObject({ required: true });
  });

  it('has the operations of this step', () => {
    const present = new Set(operations.map(label));
    for (const expected of [
      'POST /dev/staff-tokens',
      'GET /dev/outbox',
      'POST /dev/clock',
      'GET /v1/ping',
      'POST /organizations',
      'GET /organizations',
      'GET /organizations/{orgId}',
      'POST /organizations/{orgId}/members',
      'GET /organizations/{orgId}/members',
      'DELETE /organizations/{orgId}/members/{sub}',
      'POST /organizations/{orgId}/baa',
      'POST /organizations/{orgId}/environments/{envId}/api-keys',
      'GET /organizations/{orgId}/environments/{envId}/api-keys',
      'DELETE /organizations/{orgId}/environments/{envId}/api-keys/{keyId}',
      'POST /organizations/{orgId}/environments/{envId}/secrets/rotate',
      'GET /healthz',
      'GET /readyz',
      'GET /openapi.json',
      'GET /reference',
      'GET /reference/redoc.standalone.js',
    ]) {
      expect(present).toContain(expected);
    }
  });

  it('describes the operations routes (decisions 13): no credentials, 503 NOT_READY naming the failing check, the contract and its reference page', () => {
    for (const path of ['/healthz', '/readyz', '/openapi.json', '/reference', '/reference/redoc.standalone.js']) {
      expect({ path, security: doc.paths[path].get.security }).toEqual({ path, security: [] });
    }
    const ready = doc.paths['/readyz'].get.responses;
    expect(ready['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Readiness' });
    expect(errorCodesOf(ready['503'])).toEqual(['NOT_READY']);
    expect(Object.keys(doc.components.schemas.ReadinessChecks.properties).sort()).toEqual(['bus', 'eventStore', 'readStore']);
    expect(Object.keys(doc.paths['/reference'].get.responses['200'].content)).toEqual(['text/html']);
    expect(Object.keys(doc.paths['/reference/redoc.standalone.js'].get.responses['200'].content)).toEqual(['text/javascript']);
    const list = doc.paths['/organizations'].get.responses;
    expect(list['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/OrganizationList' });
    expect(doc.components.schemas.OrganizationList.properties.organizations.items).toEqual({ $ref: '#/components/schemas/Organization' });
  });

  it('gives every operation a unique operationId and one service tag', () => {
    const ids = new Map<string, string>();
    const declaredTags = new Set((doc.tags ?? []).map((t: Obj) => t.name));
    for (const t of SERVICE_TAGS) expect(declaredTags).toContain(t);
    for (const o of operations) {
      expect({ op: label(o), operationId: typeof o.op.operationId === 'string' && o.op.operationId.length > 0 }).toEqual({
        op: label(o),
        operationId: true,
      });
      expect({ op: label(o), duplicateOf: ids.get(o.op.operationId) }).toEqual({ op: label(o), duplicateOf: undefined });
      ids.set(o.op.operationId, label(o));
      expect({ op: label(o), tags: o.op.tags }).toEqual({ op: label(o), tags: [expect.any(String)] });
      expect(declaredTags).toContain(o.op.tags[0]);
    }
  });

  it('gives every operation at least one 4xx response with the Error schema', () => {
    for (const o of operations) {
      const errorResponses = Object.entries<Obj>(o.op.responses ?? {})
        .filter(([status]) => /^4(\d\d|XX)$/.test(status))
        .filter(([, response]) => usesErrorSchema(deref(response)?.content?.['application/json']?.schema));
      expect({ op: label(o), errorResponses: errorResponses.length > 0 }).toEqual({ op: label(o), errorResponses: true });
    }
  });

  it('declares every {param} of a path, and no path parameter that is not in the path', () => {
    for (const o of operations) {
      const inTemplate = [...o.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort();
      const declared = o.params.filter((p) => p.in === 'path');
      expect({ op: label(o), params: declared.map((p) => p.name).sort() }).toEqual({ op: label(o), params: inTemplate });
      for (const p of declared) {
        if (p.name === 'file' && o.path === '/assets/{file}') {
          // A content-hashed script or stylesheet of the pages (docs/decisions.md, "Pages for people"), by its file name.
          expect({ op: label(o), required: p.required, schema: p.schema }).toEqual({
            op: label(o),
            required: true,
            schema: { type: 'string', pattern: '^[A-Za-z0-9_-]+\\.(js|css)$' },
          });
          continue;
        }
        if (o.path.startsWith('/console/')) {
          // A screen of the staff console and an item on it: read by the page, not by the service.
          expect({ op: label(o), required: p.required, schema: p.schema }).toEqual({ op: label(o), required: true, schema: { type: 'string' } });
          continue;
        }
        if (p.name === 'sub') {
          // A member's subject: the identity provider's string, not a uuid.
          expect({ op: label(o), required: p.required, schema: p.schema }).toEqual({
            op: label(o),
            required: true,
            schema: { type: 'string', minLength: 1, maxLength: 255 },
          });
          continue;
        }
        expect({ op: label(o), param: p.name, required: p.required, format: p.schema?.format }).toEqual({
          op: label(o),
          param: p.name,
          required: true,
          format: 'uuid',
        });
      }
    }
  });

  it('closes request bodies and answers 400, 413 and 415 where a body is accepted', () => {
    for (const o of operations) {
      if (!o.op.requestBody) continue;
      const body = deref(o.op.requestBody) as Obj;
      expect(Object.keys(body.content)).toEqual(['application/json']);
      const schema = deref(body.content['application/json'].schema) as Obj;
      expect({ op: label(o), additionalProperties: schema.additionalProperties }).toEqual({ op: label(o), additionalProperties: false });
      expect({ op: label(o), statuses: ['400', '413', '415'].filter((s) => o.op.responses[s]) }).toEqual({
        op: label(o),
        statuses: ['400', '413', '415'],
      });
      expect(errorCodesOf(o.op.responses['400'])).toContain('VALIDATION_FAILED');
    }
  });

  it('answers 401 and 403 BAA_REQUIRED on API-key operations, 401 STAFF_AUTH_REQUIRED on staff operations', () => {
    for (const o of operations) {
      const schemes = (o.op.security ?? doc.security ?? []).flatMap((s: Obj) => Object.keys(s));
      if (schemes.includes('apiKey')) {
        expect({ op: label(o), codes: errorCodesOf(o.op.responses['401']) }).toEqual({ op: label(o), codes: ['INVALID_API_CREDENTIAL'] });
        expect({ op: label(o), codes: errorCodesOf(o.op.responses['403']) }).toEqual({ op: label(o), codes: expect.arrayContaining(['BAA_REQUIRED']) });
      }
      if (schemes.includes('staffToken')) {
        expect({ op: label(o), codes: errorCodesOf(o.op.responses['401']) }).toEqual({ op: label(o), codes: ['STAFF_AUTH_REQUIRED'] });
      }
      if (o.path.startsWith('/dev/')) {
        expect({ op: label(o), security: o.op.security }).toEqual({ op: label(o), security: [] });
      }
    }
  });

  it('answers 403 PERMISSION_REQUIRED and ROLE_REQUIRED on every integration set-up operation; sending a check-in now is any member’s', () => {
    const prefix = '/organizations/{orgId}/environments/{envId}/';
    const clinical = (path: string) => path.startsWith(`${prefix}clinical-cases`) || path === `${prefix}patients/{patientId}/check-ins`;
    const envOps = operations.filter((o) => o.path.startsWith(prefix));
    const setUp = envOps.filter((o) => !clinical(o.path));
    expect(setUp.length).toBeGreaterThan(25);
    for (const o of setUp) {
      expect({ op: label(o), codes: errorCodesOf(o.op.responses['403']) }).toEqual({
        op: label(o),
        codes: expect.arrayContaining(['PERMISSION_REQUIRED', 'ROLE_REQUIRED']),
      });
    }
    const check = envOps.find((o) => o.path === `${prefix}patients/{patientId}/check-ins`)!;
    expect(check.op.description).toMatch(/any member/i);
  });

  it('matches the staff API shapes of decisions section 3', () => {
    const schema = (name: string) => doc.components.schemas[name] as Obj;
    expect(schema('ApiKeyList').properties.apiKeys.items).toEqual({ $ref: '#/components/schemas/ApiKey' });
    expect(schema('ApiKey').required.sort()).toEqual(['createdAt', 'id', 'name', 'prefix', 'revokedAt']);
    expect(schema('ApiKeyCreated').required.sort()).toEqual(['id', 'key', 'name', 'prefix']);
    expect(schema('Member').required.sort()).toEqual(['addedAt', 'email', 'role', 'sub']);
    expect(schema('MemberList').properties.members.items).toEqual({ $ref: '#/components/schemas/Member' });
    expect(schema('AddMemberRequest').properties.role.enum).toEqual(['admin', 'member']);
    expect(deref(schema('RotateSecretRequest').properties.kind)?.enum).toEqual(['widget_signing', 'identity_token']);
    expect(schema('PingResponse').required.sort()).toEqual(['environmentId', 'environmentKind', 'organizationId']);

    const baa = doc.paths['/organizations/{orgId}/baa'].post.responses;
    expect(Object.keys(baa)).toEqual(expect.arrayContaining(['200', '201']));
    const members = doc.paths['/organizations/{orgId}/members'].post.responses;
    expect(Object.keys(members)).toContain('201');
    expect(errorCodesOf(members['409'])).toEqual(['LAST_OWNER']);
    const removeMember = doc.paths['/organizations/{orgId}/members/{sub}'].delete.responses;
    expect(removeMember['204'].content).toBeUndefined();
    expect(errorCodesOf(removeMember['403'])).toContain('ROLE_REQUIRED');
    expect(errorCodesOf(removeMember['409'])).toEqual(['LAST_OWNER']);
    expect(doc.paths['/organizations/{orgId}/members'].get.responses['200'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/MemberList',
    });
    const revoke = doc.paths['/organizations/{orgId}/environments/{envId}/api-keys/{keyId}'].delete.responses;
    expect(revoke['204']).toBeDefined();
    expect(revoke['204'].content).toBeUndefined();
  });
});
