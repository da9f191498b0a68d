export * from './errors';
export * from './validation';
export * from './filter';
export * from './body-problem';
export * from './logger';
// The gateway's access model (@svc/access), re-exported for callers that take it from @svc/http.
export * from '@svc/access';
export type { EnvironmentKind } from '@svc/decider';
export * from './auth';
export * from './widget-session';
export * from './date-time';
export * from './attachment';
export * from './lean-route';
export * from './path-params';
export * from './rate-limit';
export * from './paging';
