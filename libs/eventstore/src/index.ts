export * from './types';
export * from './decider';
export * from './subscription-loop';
export * from './sqlite-event-store';
export * from './memory-event-store';
export * from './kurrent-event-store';
export * from './encrypting-event-store';
export * from './wal-checkpointer';
