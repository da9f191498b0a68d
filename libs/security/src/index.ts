export * from './crypto';
export * from './api-keys';
export * from './staff-tokens';
