#!/usr/bin/env bash
# Installs what is missing, configures (once) and builds into $SLUICE_BUILD_DIR
# (default: build). Used by the README's two commands.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
build_dir=${SLUICE_BUILD_DIR:-build}
if [[ ! -f $build_dir/build.ninja ]]; then
  meson setup "$build_dir"
fi
ninja -C "$build_dir"
