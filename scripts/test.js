#!/usr/bin/env node
/**
 * The test command (`npm test`): builds if needed (some end-to-end tests start the built
 * standalone process, to kill and restart it), starts the servers the suites use (PostgreSQL
 * and Redis when down, scripts/services.js; the Kafka broker, scripts/kafka.js), runs Jest, and
 * ends with one line `tests: N passed, N failed`.
 *
 * The broker is started when the run includes a suite that reads process.env.KAFKA_BROKERS
 * (every full run does), unless the caller set KAFKA_BROKERS; Jest gets KAFKA_BROKERS and
 * KAFKA_REQUIRED=1, so a Kafka suite without a broker fails instead of skipping. A broker started
 * here is stopped after Jest, once no other test run holds it; one started by `npm run kafka:up`
 * stays up.
 *
 * A full run (no arguments) runs Jest a second time over the distributed target: the e2e and browser suites of
 * test/distributed/suites.js against one six-process topology through the gateway
 * (jest.distributed.config.js; on the same broker). Its counts go into the same last line, after
 * lines naming the suites run against the topology and those excluded.
 */
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const { scanLog } = require('./log-check');

const root = path.resolve(__dirname, '..');
const build = spawnSync(process.execPath, [path.join(root, 'scripts', 'build.js'), '--if-needed'], { cwd: root, stdio: 'inherit' });
if (build.status !== 0) {
  console.log('tests: 0 passed, 1 failed');
  process.exit(1);
}
// The receiver package (packages/webhooks) keeps its dev dependencies (type generator, Express for
// its adapter tests) in its own folder: installed from its lockfile when missing or older than it.
{
  const pkg = path.join(root, 'packages', 'webhooks');
  const installed = path.join(pkg, 'node_modules', '.package-lock.json');
  if (!fs.existsSync(installed) || fs.statSync(installed).mtimeMs < fs.statSync(path.join(pkg, 'package-lock.json')).mtimeMs) {
    spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: pkg, stdio: 'inherit' });
  }
}
// Servers the suites use. A server that cannot be started is not a failure by itself here: the
// suites that need it fail and say why.
spawnSync(process.execPath, [path.join(root, 'scripts', 'services.js')], { cwd: root, stdio: 'inherit' });
let kafkaHeld = false;
let kafkaFailed = false;
const kafkaEnv = { KAFKA_REQUIRED: '1' };
{
  const givenBrokers = (process.env.KAFKA_BROKERS ?? '').trim();
  const args = process.argv.slice(2);
  const readsBrokers = (file) => {
    try {
      return fs.readFileSync(file, 'utf8').includes('process.env.KAFKA_BROKERS');
    } catch {
      return false;
    }
  };
  const needed =
    !givenBrokers &&
    (args.length === 0 ||
      spawnSync(process.execPath, [path.join(root, 'node_modules', 'jest', 'bin', 'jest.js'), '--listTests', ...args], { cwd: root, encoding: 'utf8' })
        .stdout.split('\n')
        .some((f) => f.trim() && readsBrokers(f.trim())));
  if (needed) {
    const up = spawnSync(process.execPath, [path.join(root, 'scripts', 'kafka.js'), 'acquire', '--holder', String(process.pid)], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const line = (up.stdout || '').split('\n').find((l) => l.startsWith('KAFKA_BROKERS='));
    if (up.status === 0 && line) {
      kafkaHeld = true;
      kafkaEnv.KAFKA_BROKERS = line.slice('KAFKA_BROKERS='.length).trim();
      console.log(`kafka broker: ${kafkaEnv.KAFKA_BROKERS}`);
    } else {
      kafkaFailed = true;
      console.log('kafka broker FAILED to start (see above): the Kafka suites will fail');
    }
  }
}
// Signals reach Jest too; this process stays to release the broker and print the count.
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => undefined);
const results = path.join(root, '.test-results.json');
fs.rmSync(results, { force: true });
// Every service log line of the whole run (in-process apps and spawned ones) goes to one file,
// which is then searched for what must never be logged (the "no PHI in logs" rule).
// The check reads the file the run actually wrote (SVC_LOG_FILE if the caller set one), at level info
// at least: a quieter level would leave nothing to check.
const logFile = process.env.SVC_LOG_FILE ?? path.join(os.tmpdir(), `svc-test-run-${process.pid}.log`);
fs.rmSync(logFile, { force: true });
const logLevel = ['trace', 'debug', 'info'].includes(process.env.SVC_LOG_LEVEL ?? '') ? process.env.SVC_LOG_LEVEL : 'info';
const jest = spawnSync(
  process.execPath,
  [path.join(root, 'node_modules', 'jest', 'bin', 'jest.js'), '--json', `--outputFile=${results}`, ...process.argv.slice(2)],
  { cwd: root, stdio: 'inherit', env: { ...process.env, ...kafkaEnv, SVC_LOG_LEVEL: logLevel, SVC_LOG_FILE: logFile } },
);
// The distributed target (full runs): the suites of test/distributed/suites.js again, against one
// six-process topology through the gateway (jest.distributed.config.js). A topology that cannot
// start fails the run; it is never skipped.
const fullRun = process.argv.length <= 2;
const distributedResults = path.join(root, '.test-results-distributed.json');
let distributedSeconds = 0;
if (fullRun) {
  fs.rmSync(distributedResults, { force: true });
  const t0 = Date.now();
  spawnSync(
    process.execPath,
    [
      path.join(root, 'node_modules', 'jest', 'bin', 'jest.js'),
      '-c',
      path.join(root, 'jest.distributed.config.js'),
      '--json',
      `--outputFile=${distributedResults}`,
    ],
    { cwd: root, stdio: 'inherit', env: { ...process.env, ...kafkaEnv, SVC_LOG_LEVEL: logLevel, SVC_LOG_FILE: logFile, SVC_E2E_TARGET: 'distributed' } },
  );
  distributedSeconds = Math.round((Date.now() - t0) / 1000);
}
if (kafkaHeld) {
  spawnSync(process.execPath, [path.join(root, 'scripts', 'kafka.js'), 'release', '--holder', String(process.pid)], { cwd: root, stdio: 'inherit' });
}
let passed = 0;
let failed = kafkaFailed ? 1 : 0;
if (fs.existsSync(results)) {
  const r = JSON.parse(fs.readFileSync(results, 'utf8'));
  passed = r.numPassedTests;
  failed += r.numFailedTests + (r.numRuntimeErrorTestSuites || 0);
} else {
  failed += 1;
}
if (fullRun) {
  const { distributed, browser, excluded } = require('../test/distributed/suites');
  const name = (f) => path.basename(f).replace(/\.e2e-spec\.ts$/, '');
  if (fs.existsSync(distributedResults)) {
    const r = JSON.parse(fs.readFileSync(distributedResults, 'utf8'));
    passed += r.numPassedTests;
    failed += r.numFailedTests + (r.numRuntimeErrorTestSuites || 0);
    // Jest reports a global setup that threw (the topology did not start) as no test run at all.
    if (!r.success && r.numFailedTests === 0 && !r.numRuntimeErrorTestSuites) failed += 1;
    console.log(
      `distributed target: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests} standalone-only skipped, in ${distributedSeconds} s`,
    );
  } else {
    failed += 1;
    console.log('distributed target FAILED: the topology did not start or Jest gave no results (see above)');
  }
  console.log(`distributed target: ${distributed.length} suites against the six-process topology (${distributed.map(name).join(', ')})`);
  console.log(`distributed target: ${browser.length} browser suites against it (${browser.map(name).join(', ')})`);
  console.log(
    `distributed target: ${Object.keys(excluded).length} excluded, reasons in test/distributed/suites.js (${Object.keys(excluded).map(name).join(', ')})`,
  );
}
// The log check counts as one test: planted patient data, emails, keys, secrets, tokens.
{
  const text = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '';
  const { lines, findings } = scanLog(text);
  const subset = process.argv.length > 2;
  // A full run that logged no request checked nothing: that is a failure, not a pass. (A subset of
  // suites may start no service at all.)
  if (!subset && !text.includes('"msg":"request"')) findings.push({ line: 0, what: 'no request was logged: the check would prove nothing' });
  if (subset && lines === 0) {
    console.log('log check: no service ran in this subset of suites');
  } else if (findings.length === 0) {
    if (!process.env.SVC_LOG_FILE) fs.rmSync(logFile, { force: true });
    passed += 1;
    console.log(`log check: ${lines} service log lines of the whole run hold no PHI, credential or secret`);
  } else {
    failed += 1;
    console.log(`log check FAILED: ${findings.length} finding(s) in ${logFile}`);
    for (const f of findings.slice(0, 20)) console.log(`  line ${f.line}: ${f.what}`);
  }
}
// The type check of the whole tree, tests included (the build compiles the sources only, and Jest
// strips types without checking them): one test, on full runs.
if (fullRun) {
  const tsc = spawnSync(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '--noEmit', '-p', path.join(root, 'tsconfig.json')], {
    cwd: root,
    encoding: 'utf8',
  });
  if (tsc.status === 0) {
    passed += 1;
    console.log('type check: the sources and the tests type-check');
  } else {
    failed += 1;
    console.log(`type check FAILED:\n${(tsc.stdout || '').split('\n').slice(0, 30).join('\n')}`);
  }
}
// ESLint (typescript-eslint's recommended rules and the import rules of eslint.config.mjs;
// docs/decisions.md, "Layers and import rules"), then Prettier's check of the formatting: one test
// each, on full runs.
for (const [name, script, ok] of [
  ['lint', 'lint', 'lint: typescript-eslint and the import rules hold (npm run lint)'],
  ['format', 'format:check', 'format: the tree is formatted by Prettier (npm run format:check)'],
]) {
  if (!fullRun) break;
  const run = spawnSync('npm', ['run', '--silent', script], { cwd: root, encoding: 'utf8' });
  if (run.status === 0) {
    passed += 1;
    console.log(ok);
  } else {
    failed += 1;
    console.log(`${name} FAILED (npm run ${script}):\n${`${run.stdout || ''}${run.stderr || ''}`.split('\n').slice(0, 40).join('\n')}`);
  }
}
console.log(`tests: ${passed} passed, ${failed} failed`);
process.exit(jest.status === 0 && failed === 0 ? 0 : 1);
