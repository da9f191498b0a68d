/**
 * The e2e test matrix (docs/decisions.md, "Distributed topology"): every suite of test/e2e and
 * test/browser runs against standalone (jest.config.js); those of `distributed` (API suites) and
 * `browser` (the pages for people in Chromium) run against the six-process topology through the
 * gateway too (jest.distributed.config.js, `npm test`'s second pass). Each suite left out is in
 * `excluded` with the reason. Inside a suite that runs in both modes, a test that reaches inside
 * the process is declared with `inProcess(reason)` (libs/testing) and skipped against the
 * topology. test/distributed/suites.spec.ts holds these lists to the files.
 */
'use strict';

const distributed = [
  'test/e2e/case-lean-routes.e2e-spec.ts',
  'test/e2e/edge-order.e2e-spec.ts',
  'test/e2e/http-edge-audit.e2e-spec.ts',
  'test/e2e/org-roles.e2e-spec.ts',
  'test/e2e/organizations-list.e2e-spec.ts',
  'test/e2e/patient-cadence.e2e-spec.ts',
  'test/e2e/receiver-package.e2e-spec.ts',
  'test/e2e/signature-real-time.e2e-spec.ts',
  'test/e2e/text-safety.e2e-spec.ts',
  'test/e2e/uuid-params.e2e-spec.ts',
  'test/e2e/webhooks-account-before-baa.e2e-spec.ts',
  'test/e2e/widget-case-threads.e2e-spec.ts',
  'test/e2e/widget-session-cancelled.e2e-spec.ts',
  'test/e2e/widget-sessions.e2e-spec.ts',
  'test/e2e/workflow-cases.e2e-spec.ts',
  'test/e2e/workflow-engine.e2e-spec.ts',
  'test/e2e/workflow-pinning.e2e-spec.ts',
  'test/e2e/workflow-switch-off-inflight.e2e-spec.ts',
  // Bus, event store and data dir through test/e2e/case-helpers.ts (the topology's Kafka, PostgreSQL
  // event store and shared data dir); their tests that reach inside the process are inProcess.
  'test/e2e/case-ledger.e2e-spec.ts',
  'test/e2e/case-notify.e2e-spec.ts',
  'test/e2e/case-resolve-race.e2e-spec.ts',
  'test/e2e/conversation.e2e-spec.ts',
  'test/e2e/list-paging.e2e-spec.ts',
  'test/e2e/patient-cancel-dispatch.e2e-spec.ts',
  'test/e2e/patient-pathway.e2e-spec.ts',
  'test/e2e/patient-pathway-bus.e2e-spec.ts',
  'test/e2e/staff-case-patient.e2e-spec.ts',
  'test/e2e/webhooks.e2e-spec.ts',
  'test/e2e/webhooks-billing.e2e-spec.ts',
  'test/e2e/workflow-audit.e2e-spec.ts',
  // Their blocks that need settings of their own are describeInProcess (skipped on the topology).
  'test/e2e/cors.e2e-spec.ts',
  'test/e2e/workflow-agent.e2e-spec.ts',
];

/**
 * Browser suites (test/browser) against the topology: the pages served through the gateway
 * (/console/, /widget.js, /assets/*, /widget-demo by the gateway itself; the check-in page's
 * HTML answer by patient-pathway through the proxy), and the API calls the pages make.
 */
const browser = [
  'test/browser/checkin-page.e2e-spec.ts',
  'test/browser/widget.e2e-spec.ts',
  'test/browser/console.e2e-spec.ts',
  'test/browser/console-workflows.e2e-spec.ts',
];

/** Suites that run against standalone only, each with why (what the suite reaches inside). */
const excluded = {
  // Processes and stores of their own: what they test is the process itself.
  'test/e2e/apps-boot.e2e-spec.ts': 'starts each built app alone from its environment (the processes are the subject)',
  'test/e2e/audit-cli.e2e-spec.ts': 'runs the audit CLI on the SQLite files of the data dir and on a PostgreSQL schema of its own',
  'test/e2e/audit-checkpoints.e2e-spec.ts':
    'starts services with checkpoint settings of their own, on a data dir and a PostgreSQL schema of its own, and tampers with their stored events in SQL',
  'test/e2e/rebuild-cli.e2e-spec.ts': 'stops its own standalone service, deletes its read store and runs the rebuild CLI on its data dir',
  'test/e2e/case-restart.e2e-spec.ts': 'kills and restarts the standalone process on one data dir',
  'test/e2e/deployment-safety.e2e-spec.ts': 'checks file modes in the data dir and starts processes with their own settings (HOST, production mode)',
  'test/e2e/distributed-topology.e2e-spec.ts': 'starts a topology of its own (kills an app by pid, stops all six): runs in the standalone pass already',
  'test/e2e/fault-kafka-outage.e2e-spec.ts': 'starts a Kafka broker and a topology of its own and stops the broker under load (issue 21 fault tests)',
  'test/e2e/fault-case-ledger-replica.e2e-spec.ts':
    'starts a Kafka broker and a topology of its own with two case-ledger replicas and kills one under load (issue 21 fault tests)',
  'test/e2e/fault-dispatcher-kill.e2e-spec.ts':
    'starts a Kafka broker and a topology of its own with two webhook-dispatcher replicas and kills one during a burst of deliveries (issue 21 fault tests)',
  'test/e2e/fault-kafka-cluster.e2e-spec.ts':
    'starts a three-broker Kafka cluster and a topology of its own and kills a broker under load (issue 21 fault tests)',
  'test/e2e/fault-redis-restart.e2e-spec.ts':
    'starts a Redis server, a Kafka broker and a topology of its own and restarts Redis empty under it (issue 21 fault tests)',
  'test/e2e/gateway-restart.e2e-spec.ts': 'kills and restarts a built process',
  'test/e2e/patient-pathway-restart.e2e-spec.ts': 'kills and restarts the standalone process on one data dir',
  'test/e2e/postgres-event-store.e2e-spec.ts': 'starts standalone on an event-store schema of its own and restarts it',
  'test/e2e/replicas.e2e-spec.ts': 'starts a topology of its own with two case-ledger replicas and kills one by pid: runs in the standalone pass already',
  'test/e2e/quickstart.e2e-spec.ts':
    'starts the built standalone process as npm start does (the README flow; the topology flow is distributed-topology.e2e-spec.ts)',
  'test/e2e/redis-mode.e2e-spec.ts': 'starts standalone on a Redis prefix of its own and restarts it',
  'test/e2e/webhooks-restart.e2e-spec.ts': 'kills and restarts the built standalone process',
  // Settings the shared topology does not have.
  'test/e2e/gateway-access.e2e-spec.ts': 'restarts the app in place and starts services in production mode with an OIDC issuer',
  'test/e2e/operations.e2e-spec.ts':
    'reads the event store inside the process and starts standalone on its own PostgreSQL schema and Redis prefix to stop them under it',
  'test/e2e/rate-limits.e2e-spec.ts': 'every part starts a service with low limits of its own (SVC_RATE_LIMIT_*, SVC_TRUST_PROXY)',
  'test/e2e/slow-request.e2e-spec.ts': 'needs its own SVC_REQUEST_TIMEOUT_MS',
  'test/e2e/smtp-mail.e2e-spec.ts': 'needs MAIL=smtp with its own SMTP server, and production mode with an OIDC issuer',
  'test/e2e/widget-identity-replay.e2e-spec.ts': 'restarts the app in place (the replay cache across a restart)',
  // Reach inside the process.
  'test/e2e/case-threads-no-cycle.e2e-spec.ts':
    "every test runs on an in-process broker that refuses, holds and orders the requests between case-ledger and conversation (the cycle it checks for is found by taking over the broker's handlers)",
  'test/e2e/case-log-canary.e2e-spec.ts':
    "greps the log file of its own in-process app at debug level (SVC_LOG_FILE set before the app starts) and every file of its own data dir for clinical text; the topology's events and read models are in PostgreSQL and Redis, and its log lines go to the run's log file (scripts/log-check.js)",
  'test/e2e/webhook-changes-inflight.e2e-spec.ts':
    "drives the retry worker's scheduler inside the process (tick, in-flight count) and reads its read store, to meet attempts in flight",
  // Browser suites.
  'test/browser/console-oidc.e2e-spec.ts': 'signs staff in through an OpenID provider of its own (STAFF_OIDC_ISSUER set on its service)',
  'test/browser/unavailable-page.e2e-spec.ts': 'starts a gateway of its own whose route table sends the check-in page to an app that is down',
};

module.exports = { distributed, browser, excluded };
