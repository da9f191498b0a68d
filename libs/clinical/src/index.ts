export * from './text';
export * from './stemmers';
export * from './semantic';
export * from './emergency';
