/**
 * Loads TypeScript in a plain `node` process the way Jest does (SWC, decorators with metadata),
 * so kafka.spec.ts can run another Nest app in a process of its own:
 *   node libs/messaging/test/kafka-peer/register.js <file.ts>
 */
const fs = require('node:fs');
const path = require('node:path');
const { transformSync } = require('@swc/core');

require.extensions['.ts'] = function compileTs(module, filename) {
  const { code } = transformSync(fs.readFileSync(filename, 'utf8'), {
    filename,
    sourceMaps: 'inline',
    jsc: { parser: { syntax: 'typescript', decorators: true }, transform: { legacyDecorator: true, decoratorMetadata: true }, target: 'es2022' },
    module: { type: 'commonjs' },
  });
  module._compile(code, filename);
};

require(path.resolve(process.argv[2]));
