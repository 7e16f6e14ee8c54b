// Extra rspack options merged by @jupyter/builder (package.json jupyterlab.webpackConfig).
// Module ids derived from paths (the default "deterministic") hash the absolute path of
// the federation container entry, so a checkout in another directory produced a
// different remoteEntry. Named ids are relative to the package, the same everywhere.
module.exports = {
  optimization: {
    moduleIds: 'named'
  }
};
