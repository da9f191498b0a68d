/** The app's public surface (@apps/workflow-engine): its root module, for the standalone composition root. */
export { WorkflowEngineModule } from './workflow-engine.module';
