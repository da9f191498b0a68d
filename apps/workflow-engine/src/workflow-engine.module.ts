import { Module } from '@nestjs/common';

/** The workflow-engine bounded context. */
@Module({})
export class WorkflowEngineModule {}
