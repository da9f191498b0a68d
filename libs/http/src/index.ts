export * from './errors';
export * from './validation';
export * from './filter';
export * from './body-problem';
export * from './logger';
export * from './tenants';
export * from './auth';
export * from './widget-session';
