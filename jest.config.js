/** Jest: SWC transform (no type-check here; `npm run build` type-checks). */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/apps', '<rootDir>/libs', '<rootDir>/test', '<rootDir>/packages'],
  testRegex: '.*\\.(spec|e2e-spec)\\.ts$',
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      {
        jsc: { parser: { syntax: 'typescript', decorators: true }, transform: { legacyDecorator: true, decoratorMetadata: true }, target: 'es2022' },
        module: { type: 'commonjs' },
      },
    ],
  },
  moduleNameMapper: {
    '^@svc/(eventstore|messaging|read-store|security|http|clock|testing|platform|clinical|decider|access)$': '<rootDir>/libs/$1/src',
    '^@svc/webhooks-receiver$': '<rootDir>/packages/webhooks/src',
    '^@apps/(standalone|gateway|patient-pathway|case-ledger|conversation|workflow-engine|webhook-dispatcher)$': '<rootDir>/apps/$1/src',
  },
  testTimeout: 60000,
  maxWorkers: 2,
};
