/**
 * The layering of the code base, checked by scripts/test (docs/architecture.md, "Layering"):
 *   api/        -> domain code (lib/**)
 *   activities/ -> domain code
 *   workflows/  -> workflow contracts (lib/contracts/) and the activities' types, nothing else
 *   lib/**      -> never api/, workflows/, activities/ or workers/, nor the HTTP framework (express)
 *   lib/platform/  -> only lib/platform/ (config, db, logger, errors, storage, Temporal client, ...)
 *   lib/providers/ -> only lib/platform/, lib/audio/ and lib/providers/ (adapters know no domain)
 *   lib/contracts/ -> only contracts and Temporal's deterministic packages at run time (types of
 *                     domain modules are allowed: they vanish from the workflow bundle)
 * and no circular imports anywhere, type-only imports included. Between the folders of lib/,
 * imports flow down the layers below and never up or sideways, so each domain can be read
 * with only the ones beneath it in mind.
 */
const layers = [
  ['platform'],
  ['audio'],
  ['providers'],
  ['services', 'contracts'],
  ['budget', 'digitization', 'partners', 'transcripts', 'dialog-analysis'],
  ['rewrite'],
  ['knowledge'],
  ['retrieval'],
  ['vendor-sync', 'messaging', 'channels'],
  ['speech'],
  ['voices'],
];
const folder = (name) => (name === 'services' ? 'services\\.ts' : `${name}/`);
const layerRules = layers.flatMap((names, i) =>
  names.map((name) => {
    const allowed = [...layers.slice(0, i).flat(), name].map(folder).join('|');
    return {
      name: `layer-${name}`,
      severity: 'error',
      comment: `lib/${name} may import only the layers below it: ${layers.slice(0, i).flat().join(', ') || 'none'}.`,
      from: { path: `^lib/${folder(name)}` },
      to: { path: '^lib/', pathNot: `^lib/(${allowed})` },
    };
  }),
);

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...layerRules,
    {
      name: 'every-domain-has-a-layer',
      severity: 'error',
      comment: 'A new folder of lib/ gets its place in `layers` above.',
      from: { path: '^lib/', pathNot: `^lib/(${layers.flat().map(folder).join('|')})` },
      to: {},
    },
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle, even one closed only by `import type`, means two modules are one concern split in two or a contract in the wrong place.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'domain-stays-below-entry-points',
      severity: 'error',
      comment: 'Domain code serves api/, activities/ and workers/; it never reaches back into them or into workflows/.',
      from: { path: '^lib/' },
      to: { path: '^(api|workflows|activities|workers|scripts|bench|test)/' },
    },
    {
      name: 'api-uses-domain-code',
      severity: 'error',
      comment: 'Routes call domain functions, which start and signal workflows through their contracts.',
      from: { path: '^api/' },
      to: { path: '^(workflows|activities|workers)/' },
    },
    {
      name: 'activities-use-domain-code',
      severity: 'error',
      from: { path: '^activities/' },
      to: { path: '^(api|workflows|workers)/' },
    },
    {
      name: 'workflows-see-contracts-only',
      severity: 'error',
      comment: 'Workflow code is replayed: it may import its contract, other workflows, and the types of the activities.',
      from: { path: '^workflows/' },
      to: { path: '^(lib|api|workers)/', pathNot: '^lib/contracts/' },
    },
    {
      name: 'workflows-import-activity-types-only',
      severity: 'error',
      from: { path: '^workflows/' },
      to: { path: '^activities/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'workflows-deterministic-packages-only',
      severity: 'error',
      comment: 'Only the Temporal workflow API runs inside the workflow sandbox.',
      from: { path: '^(workflows|lib/contracts)/' },
      to: { dependencyTypes: ['core', 'npm', 'npm-dev'], pathNot: '^node_modules/@temporalio/(workflow|common)/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'contracts-import-contracts',
      severity: 'error',
      comment: 'A contract is shared by the workflow sandbox, the API and the worker: run-time imports stay inside lib/contracts/.',
      from: { path: '^lib/contracts/' },
      to: { path: '^lib/', pathNot: '^lib/contracts/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'platform-knows-no-domain',
      severity: 'error',
      from: { path: '^lib/platform/' },
      to: { path: '^lib/', pathNot: '^lib/platform/' },
    },
    {
      name: 'providers-know-no-domain',
      severity: 'error',
      comment: 'Adapters to outside services speak their protocol; domain rules live in the domain folders.',
      from: { path: '^lib/providers/' },
      to: { path: '^lib/', pathNot: '^lib/(platform|audio|providers)/' },
    },
    {
      name: 'domain-knows-no-http',
      severity: 'error',
      comment: 'Domain code answers through small interfaces (an answer channel, an audio sink) that api/ adapts to HTTP.',
      from: { path: '^(lib|activities|workflows)/' },
      to: { path: 'node_modules/(@types/)?(express|express-serve-static-core|multer|router|body-parser)/' },
    },
    {
      name: 'tests-stay-in-test',
      severity: 'error',
      comment: 'Production code never imports test code (benchmarks may use the local protocol servers of test/support/).',
      from: { path: '^(api|lib|workflows|activities|workers|scripts)/' },
      to: { path: '^test/' },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: ['node_modules', '^generated/'] },
    exclude: { path: ['^generated/'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'], extensions: ['.ts', '.mts', '.js', '.mjs', '.cjs', '.json'] },
    moduleSystems: ['es6', 'cjs'],
  },
};
