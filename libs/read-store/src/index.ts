export * from './types';
export * from './sqlite-read-store';
export * from './redis-read-store';
export * from './projection-runner';
export * from './projection-replay';
export * from './timers';
export * from './token-bucket';
