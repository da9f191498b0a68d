/** The app's public surface (@apps/workflow-engine): its root module, for the standalone composition root. */
export { WorkflowEngineModule } from './workflow-engine.module';
/** Its projections, for the composition roots that rebuild read models (`svc rebuild`). */
export { workflowEngineProjections } from './read-model';
