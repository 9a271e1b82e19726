#!/usr/bin/env bash
# Installs what is missing, configures (once) and builds into $SLUICE_BUILD_DIR
# (default: build). Used by the README's two commands.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
source scripts/ccache-env.sh
build_dir=${SLUICE_BUILD_DIR:-build}
# Every optional part on: install-deps provides what each needs, and a part
# that could silently drop out of the build (man pages, DPDK, the bench)
# would drop its tests out with it. A build dir configured otherwise before
# is switched over.
options=(-Ddpdk=enabled -Dman=enabled -Dbench=true -Dtests=true)
if [[ ! -f $build_dir/build.ninja ]]; then
  meson setup "$build_dir" "${options[@]}"
elif ! meson introspect --buildoptions "$build_dir" | python3 -c '
import json, sys
want = dict(arg[2:].split("=", 1) for arg in sys.argv[1:])
have = {o["name"]: str(o["value"]).lower() for o in json.load(sys.stdin)}
sys.exit(0 if all(have.get(k) == v for k, v in want.items()) else 1)' "${options[@]}"; then
  meson configure "$build_dir" "${options[@]}"
fi
ninja -C "$build_dir"
