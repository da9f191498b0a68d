import { Body, Controller, Delete, Get, HttpCode, Param, Post, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { IntegrationSetup, Staff, StaffContext, StaffGuard } from '@svc/http';
import { GatewayService } from '../../application/gateway.service';
import { AddMemberDto, CreateApiKeyDto, CreateOrganizationDto, RotateSecretDto, SignBaaDto } from './dto';

const actor = (s: StaffContext) => ({ sub: s.principal.sub, email: s.principal.email });

/** Staff API of docs/decisions.md, "Staff access": organizations, members, BAA. */
@Controller('organizations')
@UseGuards(StaffGuard)
export class OrganizationsController {
  constructor(private readonly gateway: GatewayService) {}

  @Post()
  create(@Body() body: CreateOrganizationDto, @Staff() staff: StaffContext) {
    return this.gateway.createOrganization(body.name, actor(staff));
  }

  /** The caller's organizations (a read: any staff token, no membership of one in particular). */
  @Get()
  async list(@Staff() staff: StaffContext) {
    return { organizations: await this.gateway.organizationsOf(staff.principal.sub) };
  }

  @Get(':orgId')
  get(@Staff() staff: StaffContext) {
    return this.gateway.view(staff.organization!);
  }

  @Get(':orgId/members')
  members(@Staff() staff: StaffContext) {
    return { members: this.gateway.listMembers(staff.organization!) };
  }

  /** Adds a member, or changes the role of one (owner or admin; the organization decides who may change whom). */
  @Post(':orgId/members')
  addMember(@Param('orgId') orgId: string, @Body() body: AddMemberDto, @Staff() staff: StaffContext) {
    return this.gateway.addMember(orgId, body, actor(staff));
  }

  @Delete(':orgId/members/:sub')
  @HttpCode(204)
  async removeMember(@Param('orgId') orgId: string, @Param('sub') sub: string, @Staff() staff: StaffContext) {
    await this.gateway.removeMember(orgId, sub, actor(staff));
  }

  @Post(':orgId/baa')
  async signBaa(@Param('orgId') orgId: string, @Body() body: SignBaaDto, @Staff() staff: StaffContext, @Res({ passthrough: true }) reply: FastifyReply) {
    const r = await this.gateway.signBaa(orgId, body, actor(staff));
    reply.status(r.created ? 201 : 200);
    return { baaSignedAt: r.baaSignedAt };
  }
}

/** Staff API of docs/decisions.md, "Staff access": API keys and environment secrets. */
@Controller('organizations/:orgId/environments/:envId')
@UseGuards(StaffGuard)
@IntegrationSetup()
export class EnvironmentAccessController {
  constructor(private readonly gateway: GatewayService) {}

  @Post('api-keys')
  createKey(@Param('orgId') orgId: string, @Body() body: CreateApiKeyDto, @Staff() staff: StaffContext) {
    return this.gateway.createApiKey(orgId, staff.environment!, body.name, actor(staff));
  }

  @Get('api-keys')
  async listKeys(@Param('envId') envId: string) {
    return { apiKeys: await this.gateway.listApiKeys(envId) };
  }

  @Delete('api-keys/:keyId')
  @HttpCode(204)
  async revokeKey(@Param('orgId') orgId: string, @Param('envId') envId: string, @Param('keyId') keyId: string, @Staff() staff: StaffContext) {
    await this.gateway.revokeApiKey(orgId, envId, keyId, actor(staff));
  }

  @Post('secrets/rotate')
  rotate(@Param('orgId') orgId: string, @Param('envId') envId: string, @Body() body: RotateSecretDto, @Staff() staff: StaffContext) {
    return this.gateway.rotateSecret(orgId, envId, body.kind, actor(staff));
  }
}
