import { Body, Controller, Get, HttpCode, Param, Post, Query, UseGuards } from '@nestjs/common';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  ApiError,
  ApiKeyGuard,
  ApiTenant,
  ErrorDetail,
  STAFF_PAGE_LIMIT,
  Staff,
  StaffContext,
  StaffGuard,
  Tenant,
  WidgetSession,
  WidgetSessionContext,
  WidgetSessionGuard,
  createValidationPipe,
  pageLimit,
  registerLeanRoute,
} from '@svc/http';
import { CaseLedgerService } from '../../application/case-ledger.service';
import { CaseUpdateDto, ProviderMessageDto, StaffCaseDto } from './dto';

/**
 * Response schema of GET progress (contracts/openapi.yaml CaseProgress): the lean route serializes the
 * 200 body with fast-json-stringify instead of JSON.stringify. Only the 200 body: errors keep the
 * filter's own serialization. Every member the service returns is listed (unlisted ones would be dropped).
 */
const nullableString = { type: ['string', 'null'] };
export const PROGRESS_RESPONSE_SCHEMA = {
  type: 'object',
  required: [
    'caseId',
    'status',
    'sequence',
    'nextSequence',
    'confirmationOverdue',
    'confirmationDueAt',
    'transportDelivered',
    'scheduledFor',
    'externalReference',
    'updatedAt',
  ],
  properties: {
    caseId: { type: 'string' },
    status: { type: 'string' },
    sequence: { type: 'integer' },
    nextSequence: { type: 'integer' },
    confirmationOverdue: { type: 'boolean' },
    confirmationDueAt: nullableString,
    transportDelivered: { type: 'boolean' },
    scheduledFor: nullableString,
    externalReference: nullableString,
    updatedAt: { type: 'string' },
  },
};

/** Cross-field rules of a case update (spec "Case update"), after its DTO: 400 VALIDATION_FAILED naming the missing members. */
function checkUpdate(body: CaseUpdateDto): void {
  const details: ErrorDetail[] = [];
  if (body.status === 'scheduled' && (body.scheduledFor === undefined || body.scheduledFor === null))
    details.push({ path: 'scheduledFor', message: 'scheduledFor is required with status scheduled' });
  if (body.status === 'resolved') {
    if (body.resolutionOutcome === undefined || body.resolutionOutcome === null)
      details.push({ path: 'resolutionOutcome', message: 'resolutionOutcome is required with status resolved' });
    if (body.resolutionNote === undefined || body.resolutionNote === null)
      details.push({ path: 'resolutionNote', message: 'resolutionNote (10-2000 characters) is required with status resolved' });
  }
  if (details.length) throw ApiError.validation(details);
}

/**
 * The two hottest caller operations, GET progress and POST updates, as lean routes
 * (`registerLeanRoute`, libs/http): the same guard, body rules, DTO pipe and error answers as the
 * controller below, without Nest's per-request context (docs/decisions.md, "Performance", "Lean routes and coalesced progress answers").
 */
export function registerCaseLeanRoutes(fastify: FastifyInstance, prefix: string, guard: ApiKeyGuard, cases: CaseLedgerService): void {
  const pipe = createValidationPipe();
  const authenticate = (req: FastifyRequest) => guard.authenticate(req);
  registerLeanRoute<ApiTenant, object>(fastify, pipe, {
    method: 'GET',
    url: `${prefix}/v1/clinical-cases/:caseId/progress`,
    status: 200,
    authenticate,
    responseSchema: PROGRESS_RESPONSE_SCHEMA,
    coalesce: true,
    handle: (tenant, params) => cases.progress(tenant, params.caseId),
  });
  registerLeanRoute<ApiTenant, CaseUpdateDto>(fastify, pipe, {
    method: 'POST',
    url: `${prefix}/v1/clinical-cases/:caseId/updates`,
    status: 200,
    authenticate,
    body: CaseUpdateDto,
    handle: (tenant, params, body) => {
      checkUpdate(body);
      return cases.update(tenant, `api-key:${tenant.keyId}`, params.caseId, body);
    },
  });
}

/** Caller-facing clinical-case endpoints (API key); progress and updates are lean routes (above). */
@Controller('v1/clinical-cases')
@UseGuards(ApiKeyGuard)
export class ClinicalCasesController {
  constructor(private readonly cases: CaseLedgerService) {}

  @Post(':caseId/messages')
  @HttpCode(200)
  message(@Param('caseId') caseId: string, @Body() body: ProviderMessageDto, @Tenant() tenant: ApiTenant) {
    return this.cases.providerMessage(tenant, `api-key:${tenant.keyId}`, caseId, body);
  }
}

/** Staff views of docs/decisions.md, "Cases" (staff ID token; a member of the organization). */
@Controller('organizations/:orgId/environments/:envId/clinical-cases')
@UseGuards(StaffGuard)
export class StaffClinicalCasesController {
  constructor(private readonly cases: CaseLedgerService) {}

  private tenant(staff: StaffContext) {
    return { organizationId: staff.organization!.id, environmentId: staff.environment!.id };
  }

  @Post()
  open(@Body() body: StaffCaseDto, @Staff() staff: StaffContext) {
    return this.cases.openFromStaff(this.tenant(staff), staff.principal.sub, body);
  }

  /** One page, newest first: `limit` 1-200 (50), `cursor` the previous page's `nextCursor` (docs/cases.md). */
  @Get()
  list(@Staff() staff: StaffContext, @Query('limit') limit: unknown, @Query('cursor') cursor: unknown) {
    return this.cases.list(this.tenant(staff), { limit: pageLimit(limit, STAFF_PAGE_LIMIT), cursor });
  }

  @Get(':caseId')
  get(@Param('caseId') caseId: string, @Staff() staff: StaffContext) {
    return this.cases.detail(this.tenant(staff), caseId);
  }

  @Post(':caseId/acknowledge')
  @HttpCode(200)
  acknowledge(@Param('caseId') caseId: string, @Staff() staff: StaffContext) {
    return this.cases.acknowledge(this.tenant(staff), staff.principal.sub, caseId);
  }
}

/** The signed-in patient's own cases, for the widget (session token; docs/decisions.md, "Pages for patients"). */
@Controller('widget/v1/cases')
@UseGuards(WidgetSessionGuard)
export class WidgetCasesController {
  constructor(private readonly cases: CaseLedgerService) {}

  /** Newest first, `limit` 1-50 (20); an anonymous session has none. */
  @Get()
  list(@WidgetSession() session: WidgetSessionContext, @Query('limit') limit: unknown) {
    return this.cases.patientCases(session, pageLimit(limit, WIDGET_CASE_LIMIT));
  }
}

/** The widget's case list: 1-50, 20 by default (the latest; `hasMore` says that older ones exist). */
export const WIDGET_CASE_LIMIT = { default: 20, max: 50 };
