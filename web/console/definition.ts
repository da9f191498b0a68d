/**
 * Workflow definitions in the builder: the service's own types, rules and validator
 * (apps/workflow-engine/src/domain/definition.ts, pure: it imports only the dependency-free core),
 * bundled into the page. So the builder reports, as one types, exactly what saving the draft would
 * be refused for: the same paths (`definition.steps[2].next`), the same words, the rules across
 * steps (an account-changing call after an ownership check and a confirm on every path, what the
 * patient typed used only with an ownership check, no cycle without an ask) included.
 */
export { END, changesAccount, checksOwnership, typedVariablesUsed, validateDefinition } from '../../apps/workflow-engine/src/domain/definition';
export type {
  AskFormat,
  CallApiStep,
  Category,
  Definition,
  Detail,
  HandOffCategory,
  Method,
  Operator,
  Step,
} from '../../apps/workflow-engine/src/domain/definition';
