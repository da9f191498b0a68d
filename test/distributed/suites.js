/**
 * The e2e test matrix (docs/decisions.md, "Distributed topology"): every suite of test/e2e runs
 * against standalone (jest.config.js); those of `distributed` run against the six-process
 * topology through the gateway too (jest.distributed.config.js, `npm test`'s second pass). Each
 * suite left out is in `excluded` with the reason. Inside a suite that runs in both modes, a test
 * that reaches inside the process is declared with `inProcess(reason)` (libs/testing) and skipped
 * against the topology. test/distributed/suites.spec.ts holds this list to the files.
 */
'use strict';

const distributed = [
  'test/e2e/case-lean-routes.e2e-spec.ts',
  'test/e2e/organizations-list.e2e-spec.ts',
  'test/e2e/uuid-params.e2e-spec.ts',
  'test/e2e/widget-case-threads.e2e-spec.ts',
  'test/e2e/widget-session-cancelled.e2e-spec.ts',
  'test/e2e/widget-sessions.e2e-spec.ts',
  'test/e2e/workflow-pinning.e2e-spec.ts',
  'test/e2e/conversation.e2e-spec.ts',
];

/** Suites that run against standalone only, each with why. */
const excluded = {};

module.exports = { distributed, excluded };
