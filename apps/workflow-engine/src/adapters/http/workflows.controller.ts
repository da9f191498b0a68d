import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Patch, Post, Put, Query, UseGuards } from '@nestjs/common';
import { CONFIG, ServiceConfig } from '@svc/platform';
import { addressProblem, urlProblemMessage, urlSyntaxProblem } from '@svc/security';
import { ApiError, IntegrationSetup, STAFF_PAGE_LIMIT, Staff, StaffContext, StaffGuard, pageLimit } from '@svc/http';
import { RunnerService } from '../../application/runner.service';
import { Scope, WorkflowsService } from '../../application/workflows.service';
import { orderStatusTemplate } from '../../domain/templates';
import { ActivateDto, CreateDestinationDto, CreateWorkflowDto, FromTemplateDto, RenameWorkflowDto, SaveDraftDto, TestVersionDto } from './dto';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const id = (v: string, what: string) => {
  if (!UUID.test(v)) throw ApiError.notFound(what);
  return v;
};
const scope = (s: StaffContext): Scope => ({ organizationId: s.organization!.id, environmentId: s.environment!.id });
const actor = (s: StaffContext) => ({ sub: s.principal.sub });

/** Staff endpoints of the spec's "Workflows (staff-facing)" (prefix P) and docs/decisions.md, "Definitions, versions and runs". */
@Controller('organizations/:orgId/environments/:envId/conversation-workflows')
@UseGuards(StaffGuard)
@IntegrationSetup()
export class WorkflowsController {
  constructor(
    private readonly workflows: WorkflowsService,
    private readonly runner: RunnerService,
  ) {}

  @Get()
  async list(@Staff() staff: StaffContext) {
    return { workflows: await this.workflows.list(staff.environment!.id) };
  }

  @Post()
  create(@Body() body: CreateWorkflowDto, @Staff() staff: StaffContext) {
    return this.workflows.create(scope(staff), body, actor(staff));
  }

  @Get('templates')
  templates() {
    return { templates: [orderStatusTemplate()] };
  }

  @Post('from-template')
  fromTemplate(@Body() body: FromTemplateDto, @Staff() staff: StaffContext) {
    const t = orderStatusTemplate(body.destinationStableKey);
    if (body.templateKey !== t.key) throw ApiError.notFound('Template');
    return this.workflows.create(scope(staff), { stableKey: body.stableKey ?? t.stableKey, name: body.name ?? t.name, definition: t.definition }, actor(staff));
  }

  @Put('versions/:versionId')
  saveDraft(@Param('versionId') versionId: string, @Body() body: SaveDraftDto, @Staff() staff: StaffContext) {
    return this.workflows.saveDraft(scope(staff), id(versionId, 'Workflow version'), body, actor(staff));
  }

  @Delete('versions/:versionId')
  @HttpCode(204)
  async discard(@Param('versionId') versionId: string, @Staff() staff: StaffContext) {
    await this.workflows.discardDraft(scope(staff), id(versionId, 'Workflow version'), actor(staff));
  }

  @Get('versions/:versionId/readiness')
  readiness(@Param('versionId') versionId: string, @Staff() staff: StaffContext) {
    return this.workflows.readiness(staff.environment!.id, id(versionId, 'Workflow version'));
  }

  @Post('versions/:versionId/test')
  test(@Param('versionId') versionId: string, @Body() body: TestVersionDto, @Staff() staff: StaffContext) {
    return this.runner.test(scope(staff), id(versionId, 'Workflow version'), body, actor(staff), !!staff.organization!.baaSignedAt);
  }

  @Post('versions/:versionId/activate')
  @HttpCode(200)
  activate(@Param('versionId') versionId: string, @Body() body: ActivateDto, @Staff() staff: StaffContext) {
    return this.workflows.activate(scope(staff), id(versionId, 'Workflow version'), body.expectedRevision, actor(staff));
  }

  @Patch(':profileId')
  rename(@Param('profileId') profileId: string, @Body() body: RenameWorkflowDto, @Staff() staff: StaffContext) {
    return this.workflows.rename(scope(staff), id(profileId, 'Workflow'), body.name, actor(staff));
  }

  @Delete(':profileId')
  @HttpCode(204)
  async remove(@Param('profileId') profileId: string, @Staff() staff: StaffContext) {
    await this.workflows.remove(scope(staff), id(profileId, 'Workflow'), actor(staff));
  }

  @Post(':profileId/archive')
  @HttpCode(200)
  archive(@Param('profileId') profileId: string, @Staff() staff: StaffContext) {
    return this.workflows.archive(scope(staff), id(profileId, 'Workflow'), actor(staff));
  }

  @Post(':profileId/restore')
  @HttpCode(200)
  restore(@Param('profileId') profileId: string, @Staff() staff: StaffContext) {
    return this.workflows.restore(scope(staff), id(profileId, 'Workflow'), actor(staff));
  }

  @Post(':profileId/draft')
  draft(@Param('profileId') profileId: string, @Staff() staff: StaffContext) {
    return this.workflows.createDraft(scope(staff), id(profileId, 'Workflow'), actor(staff));
  }

  @Post(':profileId/deactivate')
  @HttpCode(200)
  deactivate(@Param('profileId') profileId: string, @Staff() staff: StaffContext) {
    return this.workflows.deactivate(scope(staff), id(profileId, 'Workflow'), actor(staff));
  }

  /** One page of runs, newest first: `limit` 1-200 (50), `cursor` the previous page's `nextCursor` (docs/workflows.md). */
  @Get(':profileId/runs')
  runs(@Param('profileId') profileId: string, @Query('limit') limit: unknown, @Query('cursor') cursor: unknown, @Staff() staff: StaffContext) {
    return this.workflows.runs(staff.environment!.id, id(profileId, 'Workflow'), { limit: pageLimit(limit, STAFF_PAGE_LIMIT), cursor });
  }
}

/** HTTP token names (RFC 9110), not ours; values Node can send (no CR/LF or other controls, Latin-1 only). */
export function validHeader(name: string, value: unknown): boolean {
  return (
    typeof value === 'string' &&
    value.length <= 4000 &&
    /^[\t\x20-\x7e\x80-\xff]*$/.test(value) &&
    /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/.test(name) &&
    !/^x-svc-/i.test(name)
  );
}

/** Destinations of docs/decisions.md, "Destinations and calls" (E/destinations). Header values are never returned or logged. */
@Controller('organizations/:orgId/environments/:envId/destinations')
@UseGuards(StaffGuard)
@IntegrationSetup()
export class DestinationsController {
  constructor(
    private readonly workflows: WorkflowsService,
    @Inject(CONFIG) private readonly config: ServiceConfig,
  ) {}

  @Post()
  async create(@Body() body: CreateDestinationDto, @Staff() staff: StaffContext) {
    const headers = body.headers ?? {};
    const bad = Object.entries(headers).filter(([k, v]) => !validHeader(k, v));
    if (bad.length || Object.keys(headers).length > 20)
      throw ApiError.validation(
        bad
          .map(([k]) => ({
            path: `headers.${k}`,
            message:
              'must be an HTTP token header name (not x-svc-*) with a string value of up to 4000 characters, no CR, LF or other control characters, Latin-1 only',
          }))
          .concat(Object.keys(headers).length > 20 ? [{ path: 'headers', message: 'at most 20 headers' }] : []),
      );
    // The rules of webhook endpoint URLs (one policy, @svc/security): http(s) without user info
    // (the URL is shown back in lists and test transcripts: credentials go in `headers`); in
    // production https only, to a public address (checked again on every call, at connect time).
    const problem = urlSyntaxProblem(body.baseUrl, this.config.production) ?? (await addressProblem(body.baseUrl, this.config.production));
    if (problem) throw ApiError.validation([{ path: 'baseUrl', message: urlProblemMessage(problem) }]);
    return this.workflows.createDestination(scope(staff), body, actor(staff));
  }

  @Get()
  async list(@Staff() staff: StaffContext) {
    return { destinations: await this.workflows.listDestinations(staff.environment!.id) };
  }

  @Delete(':destinationId')
  @HttpCode(204)
  async remove(@Param('destinationId') destinationId: string, @Staff() staff: StaffContext) {
    await this.workflows.deleteDestination(scope(staff), id(destinationId, 'Destination'), actor(staff));
  }
}
