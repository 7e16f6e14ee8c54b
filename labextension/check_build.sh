#!/usr/bin/env bash
# Rebuild the JupyterLab extension from labextension/ and fail if the committed
# build output in trn_notebook/labextension/ is stale (changed or new files).
#
# Needs Node >= 20 and a Python environment with jupyterlab (for `jlpm` and
# `jupyter-builder`) on PATH, or VENV=/path/to/venv. Uses the npm registry only
# when the yarn cache is cold.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
if [[ -n "${VENV:-}" ]]; then
  export PATH="$VENV/bin:$PATH"
fi
for tool in node jlpm jupyter-builder; do
  if ! command -v "$tool" >/dev/null; then
    echo "check_build.sh: '$tool' not found on PATH (install jupyterlab, or set VENV=/path/to/venv)" >&2
    exit 2
  fi
done

cd "$here"
rm -rf lib
jlpm install --immutable
jlpm build

cd "$root"
if ! git diff --exit-code --stat -- trn_notebook/labextension; then
  echo "check_build.sh: trn_notebook/labextension is stale: rebuild with 'jlpm build' in labextension/ and commit" >&2
  exit 1
fi
untracked="$(git ls-files --others --exclude-standard -- trn_notebook/labextension)"
if [[ -n "$untracked" ]]; then
  echo "check_build.sh: build produced files that are not committed:" >&2
  echo "$untracked" >&2
  exit 1
fi
echo "check_build.sh: committed labextension build is up to date"
