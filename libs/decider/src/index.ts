/**
 * @svc/decider: the dependency-free core of every domain layer. The `Decider` shape, the
 * `DomainError` refusal, the domain types more than one context shares, the integration event
 * names a decider emits, and canonical JSON. It imports nothing (not even node: modules), so a
 * domain module that imports it loads nothing else (docs/decisions.md, "Layers and import rules";
 * eslint.config.mjs and test/contract/domain-load.spec.ts enforce it).
 */
export * from './decider';
export * from './domain-types';
export * from './contracts';
export * from './canonical-json';
