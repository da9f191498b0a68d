import { Controller, Get, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { Readiness } from './readiness';

/**
 * Liveness and readiness (docs/decisions.md, "Start-up and health"), under the base URL, without credentials, in every app
 * (standalone, and each process of distributed mode, for its orchestrator's probes). They pass the
 * same HTTP edge as every route (security headers, body rules, request log).
 */
@Controller()
export class OperationsController {
  constructor(private readonly readiness: Readiness) {}

  /** 200 while the process runs: it asks nothing else. */
  @Get('healthz')
  healthz() {
    return { status: 'ok' };
  }

  /**
   * 200 when the event store, the bus and the read store each answer; else 503 `NOT_READY` (the
   * error body, its message naming the failing checks) with the same `checks`. No address, no
   * error message of a driver.
   */
  @Get('readyz')
  async readyz(@Res({ passthrough: true }) reply: FastifyReply) {
    const report = await this.readiness.check();
    if (report.ready) return { status: 'ready', checks: report.checks };
    reply.status(503);
    return { code: 'NOT_READY', message: `Not ready: ${report.failing.join(', ')}`, status: 'not_ready', checks: report.checks };
  }
}
