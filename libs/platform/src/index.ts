export * from './config';
export * from './mailer';
export * from './private-files';
export * from './platform.module';
export * from './bootstrap';
export * from './background';
export * from './cors';
export * from './in-flight';
