export * from './types';
export * from './decider';
