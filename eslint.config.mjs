// ESLint (flat config): typescript-eslint's recommended rules on every TypeScript file, and the
// import rules of docs/decisions.md, "Layers and import rules". `npm run lint`; `npm test` counts
// it as one check on full runs. Formatting is Prettier's (`npm run format:check`).
//
// The import rules apply to the code that ships (the `src/` folders of apps/, libs/ and
// packages/); test code (`test/`, `*/test/`) may reach into what it tests.
import tseslint from 'typescript-eslint';

const IMPORT_RULE = '@typescript-eslint/no-restricted-imports';

/** A restriction: a regular expression over the import specifier and why it is refused. */
const rule = (regex, message) => ({ regex, message });

// Every source file.
const ACROSS_PACKAGES = [
  rule('^\\.{1,2}/(?:.*/)?src(?:/|$)', "A relative path into another package's src/: import it through its path alias (@svc/<lib>, @apps/<app>)."),
  rule(
    '^(?:\\.\\./)*(?:apps|libs|packages|test|bench|dist|scripts)(?:/|$)',
    'A path from the repository root: import another package through its path alias (@svc/<lib>, @apps/<app>).',
  ),
  rule('^@(?:svc|apps)/[^/]+/', "A deep import into a package: import its index (the alias itself), which is the package's public surface."),
];
const NO_APPS_IN_LIBS = rule('^@apps/', 'Libs never import apps.');
// The one exception: libs/testing starts the standalone stack in-process (its job), through its alias.
const NO_APPS_IN_TESTING_LIB = rule('^@apps/(?!standalone$)', 'Libs never import apps (libs/testing may import @apps/standalone only).');
// The composition roots import apps: apps/standalone (the six modules in one process) and apps/cli
// (`svc rebuild` composes the apps' projections).
const NO_OTHER_APPS = rule('^@apps/', 'Apps never import each other; only the composition roots (apps/standalone, apps/cli) import apps.');
const PACKAGE_STANDS_ALONE = rule('^@(?:svc|apps)/', 'A published package (packages/) stands alone: it imports no lib or app of this repository.');
// Domain code: only domain code of its own app, the dependency-free core, the clinical language lib
// and pure packages. node:crypto for hashing only (no randomness).
const DOMAIN_ONLY = rule(
  '^(?!\\.{1,2}/|@svc/decider$|@svc/clinical$|immutable$|node:crypto$)',
  'Domain code imports only domain code, @svc/decider, @svc/clinical, immutable and node:crypto hashing: no framework, driver, adapter, other lib, clock, randomness or I/O.',
);
/** A relative path that climbs out of the domain folder from a file `depth` folders below it. */
const outOfDomain = (depth) =>
  rule(`^(?:\\.\\./){${depth + 1}}(?!domain(?:/|$))`, 'Domain code imports only domain code (not application/, adapters/ or anything else of the app).');
// Inside an app, one direction: adapters/ and the module use application/ and read-model/;
// application/ never imports adapters/ (an outbound client is a port declared in application/,
// bound by the module); read-model/ (projections and their document shapes) imports only the
// app's domain code and libs.
const NO_ADAPTERS_IN_APPLICATION = rule(
  '^\\.{1,2}/(?:.*/)?adapters(?:/|$)',
  'application/ never imports adapters/: declare a port in application/ and bind the adapter in the module; read models live in read-model/.',
);
const NO_CLIENTS_IN_APPLICATION = rule(
  '^(?:node:)?(?:http|https|http2|net|tls|dgram)$|^(?:nodemailer|undici)$',
  'An outbound client (HTTP, sockets, SMTP) lives under adapters/outbound/; application/ calls it through a port it declares.',
);
const READ_MODEL_ONLY = rule(
  '^(?!\\.{1,2}/|@svc/)',
  'A read model imports only domain code of its app and libs (@svc/*): no framework, driver or other package.',
);
/** A relative path that climbs out of read-model/ from a file `depth` folders below it, into anything but domain/. */
const outOfReadModel = (depth) =>
  rule(`^(?:\\.\\./){${depth + 1}}(?!domain(?:/|$))`, 'A read model imports only domain code of its app and libs (not application/, adapters/ or the module).');
const CORE_ONLY = rule('^(?!\\.{1,2}/)', 'The core (libs/decider) imports nothing: every domain module loads it.');
const CLINICAL_ONLY = rule('^(?!\\.{1,2}/|snowball-stemmers$)', 'libs/clinical is used by domain code: it imports only itself and snowball-stemmers.');
const NODE_CRYPTO_HASHING = {
  name: 'node:crypto',
  allowImportNames: ['createHash'],
  message: 'Domain code uses node:crypto for hashing only (no randomness).',
};

/** esquery cannot hold a "/" inside a regular expression literal. */
const esqueryRegex = (source) => `/${source.replaceAll('/', '\\x2F')}/`;

/**
 * The rules for one group of files: static imports and exports (`import`, `import type`,
 * `export ... from`, `import x = require()`) by no-restricted-imports, and `import()` and
 * `require()` of a literal by no-restricted-syntax. `noDynamic`: no `import()`/`require()` at all.
 */
function importRules(restrictions, { paths = [], noDynamic = false } = {}) {
  const dynamic = noDynamic
    ? [
        { selector: 'ImportExpression', message: 'Domain code and the core load nothing dynamically.' },
        { selector: 'CallExpression[callee.name="require"]', message: 'Domain code and the core load nothing dynamically.' },
      ]
    : restrictions.flatMap((r) => [
        { selector: `ImportExpression[source.value=${esqueryRegex(r.regex)}]`, message: r.message },
        { selector: `CallExpression[callee.name="require"][arguments.0.value=${esqueryRegex(r.regex)}]`, message: r.message },
      ]);
  return {
    [IMPORT_RULE]: ['error', { paths, patterns: restrictions.map((r) => ({ ...r, caseSensitive: true })) }],
    'no-restricted-syntax': ['error', ...dynamic],
  };
}

const SOURCES = ['apps/*/src/**/*.ts', 'libs/*/src/**/*.ts', 'packages/*/src/**/*.ts'];
const DOMAIN_DEPTHS = [0, 1, 2, 3];
const READ_MODEL_DEPTHS = [0, 1, 2, 3];

export default [
  // packages/webhooks/src/events.ts is generated (json-schema-to-typescript); it carries its own eslint-disable line.
  { ignores: ['**/node_modules/**', '**/dist/**', 'packages/webhooks/src/events.ts'] },
  { linterOptions: { reportUnusedDisableDirectives: 'error' } },
  ...tseslint.configs.recommended.map((c) => ({ ...c, files: ['**/*.ts'] })),
  {
    files: ['**/*.ts'],
    languageOptions: { parser: tseslint.parser, parserOptions: { sourceType: 'module' } },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      // A leading underscore names what is left out on purpose (a destructured field dropped, a parameter an interface requires).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    // Tests read JSON answers of every shape the contract has; typing each one would restate the contract.
    files: ['test/**/*.ts', '*/*/test/**/*.ts', 'bench/**/*.ts', 'libs/testing/src/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  { files: ['**/*.js'], languageOptions: { sourceType: 'commonjs', ecmaVersion: 'latest' } },
  // Later entries replace earlier ones for the files they match, so each repeats what still applies.
  { files: SOURCES, rules: importRules(ACROSS_PACKAGES) },
  { files: ['libs/*/src/**/*.ts'], rules: importRules([...ACROSS_PACKAGES, NO_APPS_IN_LIBS]) },
  { files: ['packages/*/src/**/*.ts'], rules: importRules([...ACROSS_PACKAGES, PACKAGE_STANDS_ALONE]) },
  { files: ['libs/testing/src/**/*.ts'], rules: importRules([...ACROSS_PACKAGES, NO_APPS_IN_TESTING_LIB]) },
  { files: ['apps/*/src/**/*.ts'], ignores: ['apps/standalone/**', 'apps/cli/**'], rules: importRules([...ACROSS_PACKAGES, NO_OTHER_APPS]) },
  {
    files: ['apps/*/src/domain/**/*.ts'],
    rules: importRules([...ACROSS_PACKAGES, DOMAIN_ONLY], { paths: [NODE_CRYPTO_HASHING], noDynamic: true }),
  },
  // The same, plus no relative path out of the domain folder (by how deep the file sits in it).
  ...DOMAIN_DEPTHS.map((depth) => ({
    files: [`apps/*/src/domain/${'*/'.repeat(depth)}*.ts`],
    rules: importRules([...ACROSS_PACKAGES, DOMAIN_ONLY, outOfDomain(depth)], { paths: [NODE_CRYPTO_HASHING], noDynamic: true }),
  })),
  { files: ['apps/*/src/application/**/*.ts'], rules: importRules([...ACROSS_PACKAGES, NO_OTHER_APPS, NO_ADAPTERS_IN_APPLICATION, NO_CLIENTS_IN_APPLICATION]) },
  ...READ_MODEL_DEPTHS.map((depth) => ({
    files: [`apps/*/src/read-model/${'*/'.repeat(depth)}*.ts`],
    rules: importRules([...ACROSS_PACKAGES, NO_OTHER_APPS, READ_MODEL_ONLY, outOfReadModel(depth)]),
  })),
  { files: ['libs/decider/src/**/*.ts'], rules: importRules([CORE_ONLY], { noDynamic: true }) },
  { files: ['libs/clinical/src/**/*.ts'], rules: importRules([...ACROSS_PACKAGES, CLINICAL_ONLY], { noDynamic: true }) },
];
