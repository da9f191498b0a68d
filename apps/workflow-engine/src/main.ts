import 'reflect-metadata';
import { runService } from '@svc/platform';
import { WorkflowEngineModule } from './workflow-engine.module';

void runService('workflow-engine', [WorkflowEngineModule]);
