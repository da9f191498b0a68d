export * from './crypto';
export * from './api-keys';
export * from './staff-tokens';
export * from './webhooks';
export * from './canonical';
export * from './url-policy';
