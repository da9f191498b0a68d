#!/usr/bin/env node
/**
 * Dead letters of the Kafka consumers (deploy/README.md, "Dead letters"):
 *
 *   npm run dlq:replay -- --topic svc.case-ledger.events --dry-run    list what would be put back
 *   npm run dlq:replay -- --topic svc.case-ledger.events              put them back, each once
 *   node scripts/dlq.js replay --topic <topic>[.dlq] [--dry-run] [--brokers h:p,...]
 *
 * Brokers from --brokers, else KAFKA_BROKERS. Runs libs/messaging/src/dlq-cli.ts: the built copy
 * (dist/) when it is newer than the sources, else the sources themselves through SWC (a checkout
 * with its dev dependencies). In the image, without scripts/: `node dist/libs/messaging/src/dlq-cli.js replay ...`.
 */
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const srcDir = path.join(root, 'libs', 'messaging', 'src');
const built = path.join(root, 'dist', 'libs', 'messaging', 'src', 'dlq-cli.js');

function newestSource(dir) {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(p));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, fs.statSync(p).mtimeMs);
  }
  return newest;
}

function loadCli() {
  if (fs.existsSync(built) && fs.statSync(built).mtimeMs > newestSource(srcDir)) return require(built);
  let transformSync;
  try {
    ({ transformSync } = require('@swc/core'));
  } catch {
    process.stderr.write('dlq: dist/ is missing or older than the sources, and @swc/core is not installed: run `npm run build` first\n');
    process.exit(1);
  }
  require.extensions['.ts'] = function compileTs(module, filename) {
    const { code } = transformSync(fs.readFileSync(filename, 'utf8'), {
      filename,
      jsc: { parser: { syntax: 'typescript', decorators: true }, transform: { legacyDecorator: true, decoratorMetadata: true }, target: 'es2022' },
      module: { type: 'commonjs' },
    });
    module._compile(code, filename);
  };
  return require(path.join(srcDir, 'dlq-cli.ts'));
}

loadCli()
  .main(process.argv.slice(2))
  .then((code) => process.exit(code));
