#!/usr/bin/env bash
# Installs what is missing, configures (once) and builds into $SLUICE_BUILD_DIR
# (default: build). Used by the README's two commands.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
build_dir=${SLUICE_BUILD_DIR:-build}
# install-deps provides DPDK, so sluice-dpdk is always built: a build dir
# configured before that (dpdk=auto or disabled) is switched over.
if [[ ! -f $build_dir/build.ninja ]]; then
  meson setup "$build_dir" -Ddpdk=enabled
elif ! meson introspect --buildoptions "$build_dir" | python3 -c '
import json, sys
sys.exit(0 if any(o["name"] == "dpdk" and o["value"] == "enabled" for o in json.load(sys.stdin)) else 1)'; then
  meson configure "$build_dir" -Ddpdk=enabled
fi
ninja -C "$build_dir"
