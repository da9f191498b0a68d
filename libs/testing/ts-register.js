/**
 * Loads TypeScript in a plain `node` process the way Jest does (SWC, decorators with metadata,
 * the `paths` aliases of tsconfig.base.json such as `@svc/decider`), so a test can run code of the
 * checkout in a process of its own (another Nest app, a process that must exit or crash):
 *   node libs/testing/ts-register.js <file.ts> [args...]
 */
const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');
const { transformSync } = require('@swc/core');

const root = path.resolve(__dirname, '../..');
const { paths = {} } = JSON.parse(fs.readFileSync(path.join(root, 'tsconfig.base.json'), 'utf8')).compilerOptions ?? {};
/** `@svc/x` → its folder; `@apps/*` → apps/<name>/src. */
const aliases = Object.entries(paths).map(([alias, [target]]) => ({ alias, target }));

const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function resolveAliased(request, ...rest) {
  for (const { alias, target } of aliases) {
    if (alias.endsWith('/*') ? request.startsWith(alias.slice(0, -1)) : request === alias) {
      const mapped = alias.endsWith('/*') ? target.replace('*', request.slice(alias.length - 1)) : target;
      return resolveFilename.call(this, path.join(root, mapped), ...rest);
    }
  }
  return resolveFilename.call(this, request, ...rest);
};

require.extensions['.ts'] = function compileTs(module, filename) {
  const { code } = transformSync(fs.readFileSync(filename, 'utf8'), {
    filename,
    sourceMaps: 'inline',
    jsc: { parser: { syntax: 'typescript', decorators: true }, transform: { legacyDecorator: true, decoratorMetadata: true }, target: 'es2022' },
    module: { type: 'commonjs' },
  });
  module._compile(code, filename);
};

// The file's own arguments start at process.argv[2], as if it had been run by node itself.
const [file] = process.argv.splice(2, 1);
require(path.resolve(file));
