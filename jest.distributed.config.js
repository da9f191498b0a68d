/**
 * Jest over the distributed target: the e2e and browser suites of test/distributed/suites.js against one
 * topology of six processes (scripts/start-distributed.js) started by the global setup, reached
 * through the gateway (libs/testing e2e-target.ts). One worker: the suites share the topology's
 * dev clock, which a suite moves forward.
 *
 *   npm run build && npx jest -c jest.distributed.config.js [suite paths]
 */
const base = require('./jest.config');
const { distributed, browser } = require('./test/distributed/suites');

process.env.SVC_E2E_TARGET = 'distributed';
const { testRegex: _ignored, ...rest } = base;
module.exports = {
  ...rest,
  roots: ['<rootDir>/test'],
  testMatch: [...distributed, ...browser].map((f) => `<rootDir>/${f}`),
  globalSetup: '<rootDir>/test/distributed/global-setup.ts',
  globalTeardown: '<rootDir>/test/distributed/global-teardown.ts',
  maxWorkers: 1,
};
